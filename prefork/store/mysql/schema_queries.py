"""The MySQL store's statements of its schema (migrations, the worker account's
grants) and of its sessions' settings, by name, under the rules of queries.py."""


# DDL commits implicitly in MySQL, so two hosts migrating at once are kept
# apart by a named server lock (its name; 60 s) rather than a transaction.
GET_MIGRATION_LOCK = "SELECT GET_LOCK(%s, 60)"
RELEASE_MIGRATION_LOCK = "SELECT RELEASE_LOCK(%s)"

SCHEMA_VERSIONS = "SELECT version FROM prefork_schema_migrations"

CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS prefork_schema_migrations ("
    " version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL,"
    " applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB")

RECORD_MIGRATION = (
    "INSERT INTO prefork_schema_migrations (version, name, applied_at)"
    " VALUES (%s, %s, UTC_TIMESTAMP(6))")

# Identifiers cannot be parameters: the names filled in are checked against
# a strict pattern first (grant_statements()).
GRANT_WORKER_TABLE = "GRANT SELECT, INSERT, UPDATE ON `{database}`.`{table}` TO '{user}'@'{host}';"
# The rules (prefork_limits) are replaced by every supervisor that publishes its
# own: a rule removed from the code is a row deleted.
GRANT_WORKER_RULES = ("GRANT SELECT, INSERT, UPDATE, DELETE ON `{database}`.`prefork_limits`"
                      " TO '{user}'@'{host}';")
GRANT_READ_MIGRATIONS = ("GRANT SELECT ON `{database}`.`prefork_schema_migrations`"
                         " TO '{user}'@'{host}';")

# The first statement of a session's one set-up script (session._set_up); the
# lock wait is an int (seconds) filled in by format().
SESSION_SETTINGS = ("SET time_zone = '+00:00', innodb_lock_wait_timeout = {lock_wait:d},"
                    " lock_wait_timeout = {lock_wait:d}")

READ_COMMITTED = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

# MariaDB only (seconds): see session.py.
IDLE_TRANSACTION_TIMEOUT = "SET SESSION idle_transaction_timeout = %s"

# MariaDB built with Galera only (session._set_up). A Galera node runs a statement
# the cluster aborted (another node's write won) again when it looks autocommitted
# (wsrep_retry_autocommit, 1 by default), and tells the client nothing. In one of
# the store's scripts (START TRANSACTION ... COMMIT in one round trip), once the
# abort has rolled the transaction back, the rest of the script looks
# autocommitted: its first steps are undone, its last ones commit alone, no error
# (a claim reported a completion that had been rolled back). Without the retry
# the script stops on the error, and the store runs it again whole.
NO_AUTOCOMMIT_RETRY = "SET SESSION wsrep_retry_autocommit = 0"

