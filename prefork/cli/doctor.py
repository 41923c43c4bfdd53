"""`prefork-queue doctor`: check the configured database before going live."""
import argparse

from ..config import Config
from ..doctor.checks import Check, Status, failed, render_json, render_text
from ..doctor.roundtrip import scratch_queue
from ..errors import DatabaseUnavailable, NoQueueDatabase, UserError
from ..store import open_store
from .exit_codes import ExitCode
from .parser import command


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="Print the checks as a JSON list of {check, status, detail}.")


@command("doctor", "Check the database before going live: server and version, dialect, "
         "schema, the account's privileges, session settings, clock skew, the server's "
         "topology (a replica or read-only server, Galera, Group Replication, the binary "
         "log and semi-sync), the claim's and the completion's plans, and a real job's "
         "round trip on a scratch queue. "
         "Exit 0 when no check fails (warnings allowed), 3 when one does.",
         arguments=_doctor_arguments)
def doctor_command(args: argparse.Namespace, config: Config) -> int:
    checks = run_doctor(config)
    print(render_json(checks) if args.json else render_text(checks))
    return ExitCode.DATABASE if failed(checks) else ExitCode.OK


def run_doctor(config: Config) -> list[Check]:
    """The checks that apply to the configured database. A configuration that names
    no usable database (a bad DSN) is a usage error, not a check."""
    try:
        store = open_store(config, inspecting=True)   # a replica gets its reason, not "refused"
    except NoQueueDatabase as exc:    # a SQLite file without the schema, or no file
        return [Check("schema", Status.FAIL, str(exc))]
    except UserError as exc:          # unreachable, refused, too old, the wrong dialect
        if isinstance(exc, DatabaseUnavailable) or _refused_by_the_server(config):
            return [Check("connect", Status.FAIL, str(exc))]
        raise
    try:
        return _checks_for(store, config)
    finally:
        store.close()


def _checks_for(store: object, config: Config) -> list[Check]:
    # Imported here: each loads its backend's driver and statements.
    from ..store.mysql.store import MySQLStore
    from ..store.sqlite.store import SQLiteStore
    queue = scratch_queue()
    if isinstance(store, MySQLStore):
        from ..doctor.mysql import mysql_checks
        return mysql_checks(store, config, queue)
    assert isinstance(store, SQLiteStore), type(store)
    from ..doctor.sqlite import sqlite_checks
    return sqlite_checks(store, config, queue)


def _refused_by_the_server(config: Config) -> bool:
    """Was a refusal at connect the server's (too old, or not for the dialect set)
    rather than the configuration's? Yes when the DSN names a MySQL database and
    the password can be read: what else is refused then is the server's answer."""
    from ..store.mysql.session import parse_dsn
    try:
        parse_dsn(config.dsn)
        config.password()
    except UserError:
        return False
    return True
