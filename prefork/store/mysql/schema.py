"""The MySQL store's schema: versioned migrations under a named lock, the check
that the schema is current, and the worker account's grants. A mixin of
MySQLStore; all its SQL is here.
"""
import re

import pymysql
from pymysql.constants import ER

from ...errors import DatabaseUnavailable, UserError
from ..contract import packaged_migrations
from .session import error_code, redacted

MIGRATION_LOCK = "prefork_queue_migrate"

SCHEMA_VERSIONS = "SELECT version FROM prefork_schema_migrations"

CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS prefork_schema_migrations ("
    " version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL,"
    " applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB")

RECORD_MIGRATION = (
    "INSERT INTO prefork_schema_migrations (version, name, applied_at)"
    " VALUES (%s, %s, UTC_TIMESTAMP(6))")

# What a worker account may read, insert and update (no DELETE, no DDL): the
# jobs, the supervisor registry, and the control tables (`pause` and `restart`
# run with it too; `prune`, `discard` and `migrate` need an admin account).
WORKER_TABLES = ("prefork_jobs", "prefork_processes", "prefork_queue_states", "prefork_restarts")
ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9_.%-]{1,64}$")


class MySQLSchema:
    @staticmethod
    def migrations():
        """[(version, name, sql)] from the packaged schema/mysql/NNNN_name.sql files."""
        return packaged_migrations("mysql")

    def migrate(self):
        # DDL commits implicitly in MySQL, so two hosts are kept apart by a
        # named server lock rather than a transaction.
        if self._one("SELECT GET_LOCK(%s, 60)", (MIGRATION_LOCK,))[0] != 1:
            raise DatabaseUnavailable("another migration holds the lock; try again")
        try:
            self._rowcount(CREATE_MIGRATIONS)
            with self.conn.cursor() as cursor:
                cursor.execute(SCHEMA_VERSIONS)
                applied = {row[0] for row in cursor.fetchall()}
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
            self._one("SELECT RELEASE_LOCK(%s)", (MIGRATION_LOCK,))

    def check_schema(self):
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(SCHEMA_VERSIONS)
                applied = {row[0] for row in cursor.fetchall()}
        except pymysql.err.ProgrammingError as exc:
            if error_code(exc) == ER.NO_SUCH_TABLE:
                raise UserError(f"no queue schema in {redacted(self.dsn_args)}: "
                                "run `prefork-queue migrate`") from None
            raise
        missing = [version for version, _, _ in self.migrations() if version not in applied]
        if missing:
            raise UserError(f"queue schema is behind (missing version {missing[0]}): "
                            "run `prefork-queue migrate`")


def _split_statements(sql):
    """Split a schema file on semicolons that end a line (our files have no procedures)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";\n") if stmt.strip().rstrip(";")]


def grant_statements(user, host, database):
    """Least privilege for a worker account: read, insert and update the queue tables only."""
    for what, name in (("user", user), ("host", host), ("database", database)):
        if not ACCOUNT_NAME.match(name or ""):
            raise UserError(f"invalid {what} name {name!r}: use A-Z a-z 0-9 _ . % -")
    account = f"'{user}'@'{host}'"
    return [f"GRANT SELECT, INSERT, UPDATE ON `{database}`.`{table}` TO {account};"
            for table in WORKER_TABLES] + [
        f"GRANT SELECT ON `{database}`.`prefork_schema_migrations` TO {account};"]

