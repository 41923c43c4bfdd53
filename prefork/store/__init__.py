"""Opening the store named by the configured DSN; callers see only the Store contract."""
from ..errors import UserError


def open_store(config):
    """Connect to the configured database and return its Store."""
    dsn = config.dsn
    if not dsn:
        raise UserError("no database configured: set --dsn or PREFORK_QUEUE_DSN "
                        "(e.g. mysql://queue@127.0.0.1:3306/jobs)")
    scheme = dsn.split(":", 1)[0].lower()
    if scheme in ("mysql", "mariadb"):
        from .mysql import MySQLStore
        return MySQLStore(config)
    raise UserError(f"bad DSN: unsupported scheme {scheme!r} (use mysql://)")


def driver_errors():
    """The database drivers' base exception classes, for a one-line error at the CLI."""
    import pymysql
    return (pymysql.err.MySQLError,)
