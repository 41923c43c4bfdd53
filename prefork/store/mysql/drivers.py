"""The MySQL drivers an application may hand prefork.enqueue() a connection of:
PyMySQL, mysqlclient (MySQLdb) and mysql-connector-python.

All three take the `%s` placeholders of queries.py, report the id that ENQUEUE's
ON DUPLICATE KEY UPDATE sets as the cursor's lastrowid, and raise a missing table
as error 1146 in their ProgrammingError, with (code, message) as its first two
arguments. What differs, and is described here per driver: the classes, where a
connection keeps its database and account, and the module of its exceptions.

A driver is never imported here: a connection of it exists only in a process that
imported it, so its classes are looked up in sys.modules (an application that
installs PyMySQL as MySQLdb has no MySQLdb.connections there, and its connections
are PyMySQL's).
"""
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pymysql.constants import ER

from ...cancellation import CancelReport
from ...errors import NoQueueDatabase
from ...jobs import NewJob
from .dsn import redacted
from .session import error_code
from .store import bell_key, cancel_on, enqueue_on
from .workflows import MySQLFlows

# "Table 'jobs.prefork_jobs' doesn't exist": the database the statement looked in
# (the one the application chose last, whatever the connection was opened with).
MISSING_TABLE = re.compile(r"'(.+)\.prefork_\w+'")


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Driver:
    """One DB-API driver: enough to enqueue on its connections, ring for them and name
    their database when it lacks the queue schema (a prefork.connections.Backend)."""
    name: str                                   # as the TypeError of prefork.enqueue says it
    connections: tuple[tuple[str, str], ...]    # (module, class) of its connections
    errors: tuple[str, str]                     # (module, class) of its ProgrammingError
    database: Callable[[Any], str | None]       # the connection's database
    account: Callable[[Any], dict[str, Any]]    # user, host, port, unix_socket

    def owns(self, conn: Any) -> bool:
        loaded = (_loaded(*where) for where in self.connections)
        return isinstance(conn, tuple(cls for cls in loaded if cls is not None))

    def enqueue_on(self, cursor: Any, new_job: NewJob) -> int:
        return enqueue_on(cursor, new_job)

    def cancel_on(self, cursor: Any, job_ids: Sequence[int]) -> CancelReport:
        return cancel_on(cursor, job_ids)

    def flows_on(self, cursor: Any) -> MySQLFlows:
        return MySQLFlows(cursor)

    def bell_key_of(self, conn: Any) -> str:
        return bell_key(_text(self.database(conn)))

    @contextmanager
    def queue_schema_named(self, conn: Any) -> Iterator[None]:
        """NoQueueDatabase naming the database, not the driver's error 1146. Translated
        once the statement failed: nothing is looked up beforehand."""
        try:
            yield
        except _loaded(*self.errors) as exc:
            missing = MISSING_TABLE.search(str(exc.args[1]) if len(exc.args) > 1 else "")
            if error_code(exc) != ER.NO_SUCH_TABLE or missing is None:
                raise
            where = {key: _text(value) for key, value in self.account(conn).items()}
            raise NoQueueDatabase(redacted({**where, "database": missing.group(1)}),
                                  "run migrate (as an account allowed to CREATE)") from None


def _loaded(module: str, name: str) -> Any:
    return getattr(sys.modules.get(module), name, None)


DRIVERS = (
    Driver("PyMySQL", (("pymysql.connections", "Connection"),),
           ("pymysql.err", "ProgrammingError"),
           database=lambda conn: conn.db,
           account=lambda conn: {"user": conn.user, "host": conn.host, "port": conn.port,
                                 "unix_socket": conn.unix_socket}),
    # mysqlclient keeps no socket path; a socket connection's host reads "localhost".
    Driver("mysqlclient (MySQLdb)", (("MySQLdb.connections", "Connection"),),
           ("MySQLdb", "ProgrammingError"),
           database=lambda conn: conn.db,
           account=lambda conn: {"user": conn.user, "host": conn.host, "port": conn.port,
                                 "unix_socket": None}),
    # Its C extension's connection and the pure one share the abstract class; a pooled
    # connection hands every attribute on to the connection it wraps.
    Driver("mysql-connector-python",
           (("mysql.connector.abstracts", "MySQLConnectionAbstract"),
            ("mysql.connector.pooling", "PooledMySQLConnection")),
           ("mysql.connector.errors", "ProgrammingError"),
           database=lambda conn: conn.database,
           account=lambda conn: {"user": conn.user, "host": conn.server_host,
                                 "port": conn.server_port, "unix_socket": conn.unix_socket}),
)


def driver_of(conn: Any) -> Driver | None:
    """The driver whose connection `conn` is, or None."""
    return next((driver for driver in DRIVERS if driver.owns(conn)), None)
