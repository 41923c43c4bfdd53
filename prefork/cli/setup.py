"""Setting up: migrate the schema, print a worker account's grants, show the config."""
import argparse

from ..config import Config
from ..settings import example_file, settings_table
from ..errors import UserError
from ..store import open_store
from .helpers import with_django
from .parser import command


@command("migrate", "Create or upgrade the queue schema (safe to run twice).")
def migrate_command(args: argparse.Namespace, config: Config) -> None:
    from .. import __version__   # here: the package metadata it comes from loads slowly
    store = open_store(with_django(config), create=True)
    applied = store.migrate()
    newer = store.check_schema()
    if applied:
        versions = "version" if len(applied) == 1 else "versions"
        print(f"applied {versions} {', '.join(map(str, applied))}")
    elif newer:
        print(f"schema is newer than prefork-queue {__version__}: version {newer[-1]} was "
              "applied by a newer release; nothing to apply; this release still runs on it, "
              "upgrade it on this host")
    else:
        print("schema is up to date")


def _grants_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", default="queue_worker", help="Worker account name.")
    parser.add_argument("--host", default="%", help="Host part of the account.")
    parser.add_argument("--database", help="Database (default: the one in the DSN).")
    parser.add_argument("--tables", type=_table_list, default=[], metavar="T1,T2",
                        help="Also grant SELECT, INSERT, UPDATE, DELETE on these application "
                        "tables (db.table for another database): what a handler writes in "
                        "job.transaction() commits in the same transaction as the job's "
                        "completion, so it runs under the worker's account.")


def _table_list(text: str) -> list[str]:
    """--tables invoices,orders: the names, checked later with the others."""
    return [part.strip() for part in text.split(",") if part.strip()]


@command("grants", "Print least-privilege GRANT statements for a worker account.",
         arguments=_grants_arguments)
def grants_command(args: argparse.Namespace, config: Config) -> None:
    from ..store.mysql.schema import app_table_grants, grant_statements
    from ..store.mysql.session import parse_dsn
    database = args.database or (parse_dsn(config.dsn)["database"] if config.dsn else None)
    if not database:
        raise UserError("name the database with --database or --dsn")
    # Both check every name first: a bad one prints nothing.
    statements = grant_statements(args.user, args.host, database)
    app_statements = app_table_grants(args.user, args.host, database, args.tables)
    print(f"-- review, then run as an administrator; create the account first:\n"
          f"-- CREATE USER '{args.user}'@'{args.host}' IDENTIFIED BY '...';")
    for statement in statements:
        print(statement)
    if app_statements:
        print("-- the application's tables, which handlers write in job.transaction(): "
              "drop the privileges they do not use")
    for statement in app_statements:
        print(statement)


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--example", action="store_true",
                        help="Print a config file with every setting, commented, at its default.")
    output.add_argument("--markdown", action="store_true",
                        help="Print every setting as a Markdown table (the README's).")


def _example() -> str:
    """The settings, then the named sections, each example made beside its parser."""
    from .. import schedules
    from ..worker import commands
    return example_file() + commands.example() + schedules.example()


@command("config", "Print the effective configuration (secrets masked), where each value "
         "came from, and the settings of the config file a flag or the environment overrides. "
         "Its --help lists every setting.", arguments=_config_arguments)
def config_command(args: argparse.Namespace, config: Config) -> None:
    if args.example or args.markdown:
        print(_example() if args.example else settings_table(), end="")
        return
    overridden = {row.setting: row.file_value for row in config.overridden()}
    for name, shown, source in config.describe():
        note = f", overriding the config file's {name} = {overridden[name]}" \
            if name in overridden else ""
        print(f"{name} = {shown}    # {source}{note}")
