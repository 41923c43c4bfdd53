"""Opening a MySQL/MariaDB session: the DSN, the connection with our session
settings, and the small conversions the MySQL modules share."""
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
from pymysql.constants import CLIENT, ER

from ...errors import DatabaseUnavailable, UserError

DEADLOCK_CODES = (ER.LOCK_DEADLOCK, ER.LOCK_WAIT_TIMEOUT)


def parse_dsn(dsn):
    """mysql://user@host:port/database[?unix_socket=/path] -> connect() keyword arguments."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb"):
        raise UserError(f"bad DSN: scheme must be mysql://, got {parts.scheme or 'none'}")
    if parts.password is not None:
        raise UserError("bad DSN: it must not contain a password; set PREFORK_QUEUE_DB_PASSWORD "
                        "or db_password_file")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise UserError("bad DSN: name the database, e.g. mysql://user@127.0.0.1:3306/jobs")
    try:
        port = parts.port or 3306
    except ValueError:
        raise UserError("bad DSN: the port must be a number") from None
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    unknown = set(options) - {"unix_socket"}
    if unknown:
        raise UserError(f"bad DSN: unknown option {sorted(unknown)[0]!r}")
    return {"host": parts.hostname or "127.0.0.1", "port": port,
            "user": unquote(parts.username or "root"), "database": database,
            "unix_socket": options.get("unix_socket")}


def redacted(dsn_args):
    where = dsn_args["unix_socket"] or f"{dsn_args['host']}:{dsn_args['port']}"
    return f"mysql://{dsn_args['user']}@{where}/{dsn_args['database']}"


def micros(seconds):
    return int(round(seconds * 1_000_000))


def error_code(exc):
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else None


def connect(config, dsn_args, password):
    """A PyMySQL connection with our session settings: autocommit, UTC, READ
    COMMITTED (no gap locks for SKIP LOCKED scans), short lock waits, idle
    transactions bounded by a lease. Connection failures are one-line errors."""
    try:
        # Multi-statement scripts make a claim one round trip (see CLAIM);
        # every value in them is still a bound parameter.
        conn = pymysql.connect(
            password=password or "", charset="utf8mb4", autocommit=True,
            client_flag=CLIENT.MULTI_STATEMENTS,
            connect_timeout=config.connect_timeout, read_timeout=config.read_timeout,
            write_timeout=config.write_timeout,
            init_command=(f"SET time_zone = '+00:00',"
                          f" innodb_lock_wait_timeout = {int(config.lock_wait_timeout)},"
                          f" lock_wait_timeout = {int(config.lock_wait_timeout)}"),
            **dsn_args)
        with conn.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            _bound_idle_transactions(cursor, config.lease_seconds)
    except pymysql.err.MySQLError as exc:
        reason = exc.args[1] if len(exc.args) > 1 else type(exc).__name__
        raise DatabaseUnavailable(f"cannot connect to {redacted(dsn_args)}: {reason}") from None
    return conn


def _bound_idle_transactions(cursor, seconds):
    """End a transaction left idle longer than a lease (MariaDB). A worker whose
    host vanished inside job.transaction() would otherwise keep its job's row
    locked until the server notices the dead connection (hours), and recovery,
    which skips locked rows, could not return the job when its lease ends.
    MySQL 8 has no such setting; there the lock lasts until wait_timeout."""
    try:
        cursor.execute("SET SESSION idle_transaction_timeout = %s", (max(1, int(seconds + 0.999)),))
    except pymysql.err.MySQLError as exc:
        if error_code(exc) != ER.UNKNOWN_SYSTEM_VARIABLE:
            raise
