"""A MySQL/MariaDB session: the connection with our session settings (to a host
of the DSN: dsn.py, hosts.py), and MySQLSession, the part of the MySQL store every other part builds on (the
connection and the ways to run statements on it)."""
import math
import random
import ssl
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import pymysql
from pymysql.charset import charset_by_name
from pymysql.constants import CLIENT, COMMAND, ER

from ...config import Config
from ...errors import UserError
from ..contract import Store
from .dsn import Address
# Imported from here by the store's other parts and the CLI, as before dsn.py was.
from .dsn import parse_dsn as parse_dsn
from .dsn import redacted as redacted
from .hosts import HostFailed, connect_first, read_role, refusal
from .portable_queries import MYSQL_SQL_MODE
from .schema_queries import (IDLE_TRANSACTION_TIMEOUT, NO_AUTOCOMMIT_RETRY, READ_COMMITTED,
                             SESSION_SETTINGS)
from .server import Flavor, Server, check_supported, dialect_for, parse_version
from .session_queries import SET_NAMES

# The connection's character set; session_queries.SET_NAMES names the same.
CHARSET = "utf8mb4"
# Contention: the transaction (or statement) lost to a concurrent one and was
# rolled back; trying it again is the cure. A deadlock or lock-wait timeout on
# one server; on a cluster with writers on several nodes (Galera), a
# certification failure at commit (1213, or 1180 from the commit itself) and a
# transaction aborted by a replicated one (brute force: 1213).
DEADLOCK_CODES = (ER.LOCK_DEADLOCK, ER.LOCK_WAIT_TIMEOUT, ER.ERROR_DURING_COMMIT)
# Bounded back-off: 8 tries, the pauses doubling from 5 ms to at most 320 ms
# (about 1.3 s in all at worst), jittered so the parties do not collide again.
CONTENTION_RETRIES = 8
CONTENTION_PAUSE = (0.005, 0.32)
# COM_SET_OPTION's two options (MySQL and MariaDB client/server protocol).
MULTI_STATEMENTS_ON, MULTI_STATEMENTS_OFF = 0, 1

Row = tuple[Any, ...]
Result = TypeVar("Result")


def micros(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


def error_code(exc: BaseException) -> int | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else None


def is_contention(exc: BaseException) -> bool:
    """Lost to a concurrent transaction (DEADLOCK_CODES): retry, never a failure.
    Not 1047 (a Galera node not ready: unavailability, like a lost connection)."""
    return isinstance(exc, pymysql.err.OperationalError) and error_code(exc) in DEADLOCK_CODES


def contention_pause(attempt: int) -> float:
    """Seconds before retry `attempt` (0 first) of a contended transaction."""
    low, high = CONTENTION_PAUSE
    return random.uniform(0.5, 1.0) * min(high, low * 2.0 ** attempt)


class _Connection(pymysql.connections.Connection):
    """PyMySQL's connection, with the TLS context of its default mode (TLS when the
    server offers it, unverified) built once per process instead of once per
    connection. Building one loads the system's CA store: some 15 ms of CPU, which
    a child forked per job (--max-items 1) would pay for each job. The parent
    builds it at its first connect, before any fork: children inherit it.

    And the driver's SET NAMES at login can wait for our settings, to go in their
    round trip (names_deferred: see connect()).

    And a command can go ahead of the next one, in the same write (send_ahead): the
    server answers both, and the next one's round trip is the only one waited for."""

    names_deferred = False
    # What send_ahead() queued for the next command: (command, argument), in order.
    ahead: list[tuple[int, bytes]] = []
    corked: list[bytes] | None = None   # writes held back to go out as one
    pending: bytes | None = None   # see leave_pending()

    def send_ahead(self, command: int, argument: bytes) -> None:
        """Send this command in the write of the next one, and read its answer before
        that one's: no round trip of its own. Only for a command whose failure the next
        one is guarded against (it runs all the same): a failure closes the connection
        and is raised by the next command."""
        self.ahead = [*self.ahead, (command, argument)]

    def leave_pending(self, statement: bytes) -> None:
        """Send this statement ahead of the next command, unless take_pending() takes
        it back first: what a job's transaction left to undo (autocommit off) costs
        nothing when the next job's transaction wants it as it is."""
        self.pending = statement

    def take_pending(self) -> bytes | None:
        """The statement leave_pending() left, now not to be sent."""
        statement, self.pending = self.pending, None
        return statement

    def connect(self, sock: Any = None) -> None:
        self.pending = None   # a new session has nothing of the old one's to undo
        super().connect(sock)

    def _execute_command(self, command: int, sql: str | bytes) -> None:
        driver = cast(Any, super())   # the private methods are not in PyMySQL's stubs
        pending = self.take_pending()
        if pending is not None:
            self.send_ahead(COMMAND.COM_QUERY, pending)
        if not self.ahead:
            driver._execute_command(command, sql)
            return
        ahead, self.ahead, self.corked = self.ahead, [], []
        try:
            for queued in ahead:
                driver._execute_command(*queued)
            driver._execute_command(command, sql)
        finally:
            corked, self.corked = self.corked, None
        driver._write_bytes(b"".join(corked))
        for _ in ahead:
            self._read_answer_ahead()
        cast(Any, self)._next_seq_id = 1   # the next command's answer is the caller's

    def _read_answer_ahead(self) -> None:
        """Read one queued command's answer (an OK or EOF packet). An error leaves the
        commands after it run or running, their answers unread: close the connection,
        so nothing more goes through it, and raise."""
        raw = cast(Any, self)
        raw._next_seq_id = 1
        try:
            raw._read_packet()
        except pymysql.err.MySQLError:
            raw._force_close()
            raise

    def _write_bytes(self, data: bytes) -> None:
        if self.corked is not None:
            self.corked.append(data)
        else:
            cast(Any, super())._write_bytes(data)

    def set_character_set(self, charset: str, collation: str | None = None) -> None:
        if not self.names_deferred:
            super().set_character_set(charset, collation)
            return
        # At login: what the driver would record, without sending anything. Only
        # this once: a reconnection (ping) sends its own SET NAMES.
        self.names_deferred = False
        raw = cast(Any, self)   # the attributes are not in PyMySQL's stubs
        raw.charset, raw.collation = charset, collation
        raw.encoding = charset_by_name(charset).encoding

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        driver = cast(Any, super())   # the private method is not in PyMySQL's stubs
        if sslp:   # TLS options given: the driver's own context (we pass none today)
            return cast(ssl.SSLContext, driver._create_ssl_ctx(sslp))
        if not _DEFAULT_TLS:
            _DEFAULT_TLS.append(driver._create_ssl_ctx(sslp))
        return _DEFAULT_TLS[0]


_DEFAULT_TLS: list[ssl.SSLContext] = []   # _Connection's, once built


def connect(config: Config, dsn_args: dict[str, Any], password: str | None,
            inspecting: bool = False) -> tuple[_Connection, Server, Flavor, dict[str, Any]]:
    """A PyMySQL connection with our session settings: autocommit, UTC, READ
    COMMITTED (no gap locks for SKIP LOCKED scans), short lock waits, idle
    transactions bounded by a lease; the server it reached, the dialect to
    speak to it, and the arguments of its host (parse_dsn's, for that host).
    Connection failures are one-line errors, and so is a server too old for
    the queue or for the dialect asked for.

    Of the DSN's hosts, the first that takes the connection and may be written
    to (hosts.py): the set-up script reads whether it may. Inspecting (the
    doctor), the first that takes the connection, whatever its role.

    One round trip after the login: the driver's SET NAMES and our settings in
    one script (a forked child connects once per max-items, so each round trip
    of its set-up counts; PyMySQL's own init_command would be one more)."""
    _check_sendable(password)
    one_host = {key: value for key, value in dsn_args.items() if key != "hosts"}

    def attempt(address: Address) -> tuple[_Connection, Server, Flavor]:
        return _connect_to({**one_host, "host": address[0], "port": address[1]}, config,
                           password, inspecting)

    (conn, server, dialect), (host, port) = connect_first(
        dsn_args["hosts"], attempt, lambda listed: redacted({**dsn_args, "hosts": listed}))
    return conn, server, dialect, {**one_host, "host": host, "port": port}


def _connect_to(dsn_args: dict[str, Any], config: Config, password: str | None,
                inspecting: bool) -> tuple[_Connection, Server, Flavor]:
    """connect()'s work on one host; HostFailed (its reason) when it cannot be used."""
    try:
        # Multi-statement scripts make a claim one round trip (see queries.CLAIM);
        # every value in them is still a bound parameter.
        conn = _Connection(
            password=password or "", charset=CHARSET, autocommit=True,
            client_flag=CLIENT.MULTI_STATEMENTS,
            connect_timeout=config.connect_timeout, read_timeout=config.connect_timeout,
            write_timeout=config.write_timeout, defer_connect=True, **dsn_args)
        conn.names_deferred = True   # _set_up sends it
        conn.connect()   # greeting and login in connect_timeout: a hung server never greets
        cast(Any, conn)._read_timeout = config.read_timeout   # PyMySQL's wait from here on
        try:
            # The version of the handshake: known without a round trip.
            server = parse_version(str(cast(Any, conn).get_server_info()))
            check_supported(server)
            dialect = dialect_for(server, config.dialect)
            refused = refusal(_set_up(conn, server, dialect, config), conn)
            if refused and not inspecting:
                raise HostFailed(refused)
        except BaseException:
            conn.close()
            raise
    except pymysql.err.MySQLError as exc:
        raise HostFailed(exc.args[1] if len(exc.args) > 1 else type(exc).__name__) from None
    return conn, server, dialect


def _set_up(conn: pymysql.connections.Connection, server: Server, dialect: Flavor,
            config: Config) -> Row:
    """The driver's SET NAMES and our session settings, in one round trip: a script
    of the named statements, the dialect's own among them; and the last, the
    server's role (host_queries.py), whose row is returned."""
    statements = [SET_NAMES, SESSION_SETTINGS.format(lock_wait=int(config.lock_wait_timeout)),
                  READ_COMMITTED]
    args: tuple[int, ...] = ()
    if dialect is Flavor.MARIADB:
        # End a transaction left idle longer than a lease. A worker whose host
        # vanished inside job.transaction() would otherwise keep its job's row
        # locked until the server notices the dead connection (hours), and
        # recovery, which skips locked rows, could not return the job when its
        # lease ends. (The mysql dialect bounds that span its own way: see
        # portable.py.)
        statements.append(IDLE_TRANSACTION_TIMEOUT)
        args = (idle_seconds(config.lease_seconds),)
        # Galera: no silent retry of an aborted statement (see NO_AUTOCOMMIT_RETRY);
        # last of the settings, as a server built without Galera refuses it.
        statements.append(NO_AUTOCOMMIT_RETRY)
    else:
        statements.append(MYSQL_SQL_MODE)
    return read_role(conn, server.flavor is Flavor.MARIADB, statements, args)


def idle_seconds(lease_seconds: float) -> int:
    """How long a transaction may sit idle: a lease, in whole seconds, at least one."""
    return max(1, math.ceil(lease_seconds))


def _check_sendable(password: str | None) -> None:
    """PyMySQL sends a password as Latin-1, and its error for any other character
    quotes that character: refuse it here, without a word of the password."""
    try:
        (password or "").encode("latin-1")
    except UnicodeEncodeError:
        raise UserError("the database password has a character outside Latin-1, which "
                        "the driver (PyMySQL) cannot send") from None


def set_multi_statements(conn: _Connection, enabled: bool) -> None:
    """Let the server take several statements in one query, or refuse them, from the
    next command on: COM_SET_OPTION (PyMySQL has no method for it), sent ahead of that
    command. Its failure closes the connection before the next command's answer is
    read: a handler never gets a cursor whose stacked statements the server takes."""
    option = MULTI_STATEMENTS_ON if enabled else MULTI_STATEMENTS_OFF
    conn.send_ahead(COMMAND.COM_SET_OPTION, struct.pack("<H", option))


class MySQLSession(Store):
    """What every part of the MySQL store shares: one connection (autocommit) and
    the ways to run statements on it."""
    conn: _Connection
    dsn_args: dict[str, Any]
    server: Server      # which server the connection reached, from its handshake
    dialect: Flavor     # the SQL this store speaks to it
    # Whether the server takes multi-statement queries from us now: on from connect()
    # for our scripts, off while a handler holds our cursor (see _multi_statements).
    multi_statements_on = True

    def connection_id(self) -> int:
        """The server's id of our session, from its greeting (no round trip)."""
        return int(cast(Any, self.conn).thread_id())

    def _multi_statements(self, enabled: bool) -> None:
        """Turn multi-statement queries on or off, only when that changes anything:
        a batch of job.transaction() jobs turns them off once and on once."""
        if self.multi_statements_on != enabled:
            set_multi_statements(self.conn, enabled)
            self.multi_statements_on = enabled

    def _send_ahead(self, sql: str, args: Sequence[Any] = ()) -> None:
        """Send this statement in the write of the next one (see _Connection.send_ahead)."""
        with self.conn.cursor() as cursor:
            statement = cursor.mogrify(sql, args or None)
        self.conn.send_ahead(COMMAND.COM_QUERY, statement.encode(self.conn.encoding))

    def _one(self, sql: str, args: Sequence[Any] | None = None) -> Row:
        """The first row of a read (which must return one)."""
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            row = cursor.fetchone()
        assert row is not None, sql
        return row

    def _all(self, sql: str, args: Sequence[Any] | None = None) -> list[Row]:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def _dicts(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def _rowcount(self, sql: str, args: Sequence[Any] | None = None) -> int:
        """Run one autocommitted statement; its affected row count."""
        def execute() -> int:
            with self.conn.cursor() as cursor:
                return cursor.execute(sql, args)
        return self._retry_contention(execute)

    def _retry_contention(self, action: Callable[[], Result]) -> Result:
        """Run action(). Contention (is_contention) is not failure: roll back and
        retry after a bounded, jittered back-off. Only for whole transactions or
        autocommitted statements."""
        for attempt in range(CONTENTION_RETRIES):
            try:
                return action()
            except pymysql.err.OperationalError as exc:
                self._rollback_quietly()
                if not is_contention(exc) or attempt == CONTENTION_RETRIES - 1:
                    raise
                time.sleep(contention_pause(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _rollback_quietly(self) -> None:
        # A failed statement stops a script where it is, maybe inside its
        # transaction; end that before anything else is sent.
        try:
            self.conn.rollback()
        except pymysql.err.Error:
            pass

    @contextmanager
    def _transaction(self) -> Iterator[pymysql.cursors.Cursor]:
        self.conn.begin()
        try:
            with self.conn.cursor() as cursor:
                yield cursor
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def _script_results(self, script: str, args: Sequence[Any]) -> list[list[Row]]:
        """Run a multi-statement script; the rows of the statements that return any
        (the reads), in order."""
        results = []
        self._multi_statements(True)
        with self.conn.cursor() as cursor:
            cursor.execute(script, args)
            while True:
                if cursor.description is not None:
                    results.append(list(cursor.fetchall()))
                if not cursor.nextset():
                    return results
