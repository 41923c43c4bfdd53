"""Opening the store named by the configured DSN; callers see only the Store contract.

    mysql://user@host:3306/database    MySQL 8 / MariaDB 10.6+, shared by many hosts
    sqlite:///relative/path.db         a SQLite file relative to the working directory,
    sqlite:////absolute/path.db        or absolute; one host only, on a local disk

Only `run` and `migrate` create a queue database: a SQLite file opened without
create=True must exist already, so a command whose DSN was forgotten (and fell
back to the default file) refuses instead of filling a file no worker reads.
"""
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import UserError

if TYPE_CHECKING:   # loaded with a backend's store: a command line that opens none skips it
    from .contract import Store


def open_store(config: Config, create: bool = False, inspecting: bool = False) -> "Store":
    """Connect to the configured database and return its Store. create=True lets a
    SQLite store create a missing file (empty: migrate() applies the schema); a
    MySQL database is always the administrator's to create. inspecting=True (the
    doctor's) lets a MySQL store connect to a server that must not be written to
    (a replica, a read-only or unsynced node), so that it can say why."""
    scheme = _scheme(config)
    if scheme in ("mysql", "mariadb"):
        from .mysql.store import MySQLStore
        return MySQLStore(config, inspecting=inspecting)
    if scheme == "sqlite":
        from .sqlite.store import SQLiteStore
        return SQLiteStore(config, create=create)
    raise UserError(f"bad DSN: unsupported scheme {scheme!r} (use mysql:// or sqlite:///)")


def _scheme(config: Config) -> str:
    dsn: str = config.dsn
    if not dsn:
        raise UserError("no database configured: set --dsn or PREFORK_QUEUE_DSN "
                        "(e.g. mysql://queue@127.0.0.1:3306/jobs or sqlite:///prefork-queue.db)")
    return dsn.split(":", 1)[0].lower()


def create_embedded(config: Config) -> None:
    """For `run`: a SQLite database is created and migrated on the supervisor's first
    start (the README's first command needs no server and no setup). A MySQL schema
    is left to `migrate`, run by an account allowed to CREATE."""
    if _scheme(config) == "sqlite":
        store = open_store(config, create=True)
        try:
            store.migrate()
        finally:
            store.close()


def driver_errors() -> tuple[type[Exception], ...]:
    """The database drivers' base exception classes, for a one-line error at the CLI."""
    import sqlite3

    import pymysql
    return (pymysql.err.MySQLError, sqlite3.Error)
