"""The application's connection, as prefork.enqueue(), prefork.cancel() and
prefork.notify() take it, and the store module that speaks its dialect:

- a DB-API connection of sqlite3, or of a MySQL driver of store/mysql/drivers.py
  (PyMySQL, mysqlclient, mysql-connector-python);
- a SQLAlchemy 2 Session (or scoped_session) or Connection on one of those: the
  DB-API connection it holds for its transaction. The job is inserted (or cancelled)
  there, so it commits or rolls back with the session; nothing is committed, and no transaction
  of our own is begun.

Neither SQLAlchemy nor a driver is imported here: an object of theirs exists only
in a process that imported them, so their classes are looked up in sys.modules
(and a Python built without sqlite3 still runs MySQL).
"""
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from .cancellation import CancelReport
from .jobs import NewJob


class Backend(Protocol):
    """What enqueue(), cancel(), notify() and a Client need of a store module
    (store/*/store.py) or of a MySQL driver (store/mysql/drivers.py), given a DB-API
    connection."""

    def enqueue_on(self, cursor: Any, new_job: NewJob) -> int: ...

    def cancel_on(self, cursor: Any, job_ids: Sequence[int]) -> CancelReport: ...

    def bell_key_of(self, conn: Any) -> str: ...

    def queue_schema_named(self, conn: Any) -> AbstractContextManager[None]: ...

    def flows_on(self, cursor: Any) -> Any: ...   # store/flows.py's Flows, on the cursor


# The backend of each class of DB-API connection met so far: a class's backend never
# changes, and enqueue() is called with the same one again and again.
_KNOWN: dict[type, Backend] = {}


def in_transaction(conn: Any, caller: str) -> tuple[Backend, Any]:
    """For enqueue() and cancel(): the backend and the DB-API connection of `conn`'s
    transaction. A SQLAlchemy Session or Connection not in one begins it, as its own
    execute() would, so that its commit() commits the change and its rollback() takes
    it back."""
    known = _KNOWN.get(type(conn))
    if known is not None:   # a DB-API connection met before: no SQLAlchemy to look for
        return known, conn
    if isinstance(conn, _sqlalchemy_sessions()):
        conn = conn.connection()   # the session's, its transaction begun if need be
    if isinstance(conn, _sqlalchemy_connection()):
        if not conn.in_transaction():
            conn.begin()
        conn = conn.connection.driver_connection
    return backend_for(conn, caller)


@contextmanager
def outside_transaction(conn: Any, caller: str) -> Iterator[tuple[Backend, Any]]:
    """For notify(), after the commit: the backend and a DB-API connection to the same
    database, no transaction begun. A Session's bind lends one for the moment
    (session.connection() would begin the session's next transaction)."""
    if isinstance(conn, _sqlalchemy_sessions()):
        conn = conn.get_bind()
        if not isinstance(conn, _sqlalchemy_connection()):   # an Engine
            with conn.connect() as lent:
                yield backend_for(lent.connection.driver_connection, caller)
            return
    if isinstance(conn, _sqlalchemy_connection()):
        conn = conn.connection.driver_connection
    yield backend_for(conn, caller)


def backend_for(conn: Any, caller: str = "prefork.enqueue()") -> tuple[Backend, Any]:
    """The backend for the DB-API connection `conn`, and `conn`; a TypeError naming
    what is accepted for anything else (under SQLAlchemy: naming its DB-API connection)."""
    known = _KNOWN.get(type(conn))
    if known is not None:
        return known, conn
    sqlite_connection = _loaded("sqlite3", "Connection")
    if sqlite_connection is not None and isinstance(conn, sqlite_connection):
        from .store.sqlite import store as sqlite_backend
        _KNOWN[type(conn)] = sqlite_backend
        return sqlite_backend, conn
    from .store.mysql.drivers import DRIVERS, driver_of
    driver = driver_of(conn)
    if driver is not None:
        _KNOWN[type(conn)] = driver
        return driver, conn
    raise TypeError(f"{caller} takes a DB-API connection of "
                    f"{', '.join(driver.name for driver in DRIVERS)} or sqlite3, or a "
                    f"SQLAlchemy Session or Connection on one of them; got a "
                    f"{_type_name(conn)}")


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _sqlalchemy_sessions() -> Any:   # a tuple of classes: Any, not to narrow `conn`
    found = (_loaded("sqlalchemy.orm.session", "Session"),
             _loaded("sqlalchemy.orm.scoping", "scoped_session"))
    return tuple(cls for cls in found if cls is not None)


def _sqlalchemy_connection() -> Any:
    found = _loaded("sqlalchemy.engine.base", "Connection")
    return (found,) if found is not None else ()


def _loaded(module: str, name: str) -> Any:
    """The class `name` of `module` if that module was imported, else None."""
    return getattr(sys.modules.get(module), name, None)
