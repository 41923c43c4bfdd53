"""Opening the store named by the configured DSN; callers see only the Store contract.

    mysql://user@host:3306/database    MySQL 8 / MariaDB 10.6+, shared by many hosts
    sqlite:///relative/path.db         a SQLite file relative to the working directory,
    sqlite:////absolute/path.db        or absolute; one host only, on a local disk
"""
from ..config import Config
from ..errors import UserError
from .contract import Store


def open_store(config: Config) -> Store:
    """Connect to the configured database and return its Store."""
    dsn = config.dsn
    if not dsn:
        raise UserError("no database configured: set --dsn or PREFORK_QUEUE_DSN "
                        "(e.g. mysql://queue@127.0.0.1:3306/jobs or sqlite:///prefork-queue.db)")
    scheme = dsn.split(":", 1)[0].lower()
    if scheme in ("mysql", "mariadb"):
        from .mysql.store import MySQLStore
        return MySQLStore(config)
    if scheme == "sqlite":
        from .sqlite.store import SQLiteStore
        return SQLiteStore(config)
    raise UserError(f"bad DSN: unsupported scheme {scheme!r} (use mysql:// or sqlite:///)")


def driver_errors() -> tuple[type[Exception], ...]:
    """The database drivers' base exception classes, for a one-line error at the CLI."""
    import sqlite3

    import pymysql
    return (pymysql.err.MySQLError, sqlite3.Error)
