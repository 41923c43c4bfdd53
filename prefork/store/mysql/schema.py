"""The MySQL store's schema: versioned migrations under a named lock, the check
that the schema is current, and the worker account's grants. A part of
MySQLStore; its statements are named in queries.py.
"""
import re
from typing import Sequence

import pymysql
from pymysql.constants import ER

from ...errors import DatabaseUnavailable, NoQueueDatabase, UserError
from ..contract import packaged_migrations
from .schema_queries import (
    CREATE_MIGRATIONS,
    GET_MIGRATION_LOCK,
    GRANT_READ_MIGRATIONS,
    GRANT_WORKER_RULES,
    GRANT_WORKER_TABLE,
    RECORD_MIGRATION,
    RELEASE_MIGRATION_LOCK,
    SCHEMA_VERSIONS,
)
from .session import MySQLSession, error_code, redacted

MIGRATION_LOCK = "prefork_queue_migrate"

# What a worker account may read, insert and update (no DELETE, no DDL): the
# jobs, the supervisor registry, the control tables (`pause` and `restart`
# run with it too; `prune`, `discard` and `migrate` need an admin account), and
# the per-minute rollup supervisors write for the dashboard.
WORKER_TABLES = ("prefork_jobs", "prefork_processes", "prefork_queue_states", "prefork_restarts",
                 "prefork_minutes",        # the supervisors' per-minute counts (dashboard)
                 "prefork_task_results",   # a Django task's result, written with its completion
                 "prefork_limit_groups",   # the limited claim's group locks and token buckets
                 "prefork_workflows")      # a workflow's bookkeeping, written with its members' ends
# The published limits: a worker account may also DELETE there (publish_limits
# removes the rules its code no longer declares).
RULES_TABLE = "prefork_limits"
ACCOUNT_NAME = re.compile(r"[A-Za-z0-9_.%-]{1,64}")   # whole names only: fullmatch
# An application table for --tables: `table`, or `database.table` for another
# database on the same server (the handler's connection reaches it too).
TABLE_NAME = re.compile(r"(?:([A-Za-z0-9_$]{1,64})\.)?([A-Za-z0-9_$]{1,64})")
QUEUE_TABLES = WORKER_TABLES + (RULES_TABLE, "prefork_schema_migrations")
# The DML a handler may run in job.transaction() on its own tables: its writes
# commit with the job's completion, under the worker's account. Every row
# statement (SELECT ... FOR UPDATE needs SELECT and UPDATE, REPLACE needs INSERT
# and DELETE); no DDL, no LOCK TABLES (it would commit the job's transaction).
GRANT_APP_TABLE = ("GRANT SELECT, INSERT, UPDATE, DELETE ON `{database}`.`{table}`"
                   " TO '{user}'@'{host}';")


class MySQLSchema(MySQLSession):
    @staticmethod
    def migrations() -> list[tuple[int, str, str]]:
        """[(version, name, sql)] from the packaged schema/mysql/NNNN_name.sql files."""
        return packaged_migrations("mysql")

    def migrate(self) -> list[int]:
        # DDL commits implicitly in MySQL, so two hosts are kept apart by a
        # named server lock rather than a transaction.
        if self._one(GET_MIGRATION_LOCK, (MIGRATION_LOCK,))[0] != 1:
            raise DatabaseUnavailable("another migration holds the lock; try again")
        try:
            self._rowcount(CREATE_MIGRATIONS)
            applied = {row[0] for row in self._all(SCHEMA_VERSIONS)}
            done_now = []
            for version, name, sql in self.migrations():
                if version in applied:
                    continue
                for statement in _split_statements(sql):
                    self._rowcount(statement)
                self._rowcount(RECORD_MIGRATION, (version, name))
                done_now.append(version)
            return done_now
        finally:
            self._one(RELEASE_MIGRATION_LOCK, (MIGRATION_LOCK,))

    def check_schema(self) -> list[int]:
        try:
            applied = {row[0] for row in self._all(SCHEMA_VERSIONS)}
        except pymysql.err.ProgrammingError as exc:
            if error_code(exc) == ER.NO_SUCH_TABLE:
                raise NoQueueDatabase(redacted(self.dsn_args),
                                      "run migrate (as an account allowed to CREATE)") from None
            raise
        known = {version for version, _, _ in self.migrations()}
        missing = sorted(known - applied)
        if missing:
            raise UserError(f"queue schema is behind (missing version {missing[0]}): "
                            "run `prefork-queue migrate`")
        return sorted(applied - known)


def _split_statements(sql: str) -> list[str]:
    """Split a schema file on semicolons that end a line (our files have no procedures)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";\n") if stmt.strip().rstrip(";")]


def grant_statements(user: str, host: str, database: str) -> list[str]:
    """Least privilege for a worker account: read, insert and update the queue tables
    only (and replace the published limits)."""
    names = _account(user, host, database)
    return [GRANT_WORKER_TABLE.format(table=table, **names) for table in WORKER_TABLES] + [
        GRANT_WORKER_RULES.format(**names), GRANT_READ_MIGRATIONS.format(**names)]


def app_table_grants(user: str, host: str, database: str, tables: Sequence[str]) -> list[str]:
    """GRANT_APP_TABLE on each of the application's `tables` (`table` in `database`, or
    `other_database.table`); UserError for a bad name or a queue table, before any."""
    names = _account(user, host, database)
    return [GRANT_APP_TABLE.format(**{**names, "database": in_database, "table": table})
            for in_database, table in [_app_table(name, database) for name in tables]]


def _account(user: str, host: str, database: str) -> dict[str, str]:
    for what, name in (("user", user), ("host", host), ("database", database)):
        if not ACCOUNT_NAME.fullmatch(name or ""):
            raise UserError(f"invalid {what} name {name!r}: use A-Z a-z 0-9 _ . % -")
    return {"user": user, "host": host, "database": database}


def _app_table(name: str, database: str) -> tuple[str, str]:
    """(database, table) of one --tables name; UserError for a bad or a queue table name."""
    match = TABLE_NAME.fullmatch(name)
    if not match:
        raise UserError(f"invalid table name {name!r}: use A-Z a-z 0-9 _ $, "
                        f"optionally after a database name and a dot")
    in_database, table = match.group(1) or database, match.group(2)
    if table.lower() in QUEUE_TABLES:
        raise UserError(f"{table} is a queue table: its grants are printed already, "
                        f"and a worker must not DELETE from it")
    return in_database, table
