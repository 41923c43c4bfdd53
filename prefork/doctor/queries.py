"""The statements `doctor` sends of its own, by name (the queue's own statements,
whose plans it checks, are read from the dialect's queries module). Values are
bound parameters; MySQL's use %s, SQLite's :name."""

# --- MySQL and MariaDB -------------------------------------------------------------------

ACCOUNT = "SELECT CURRENT_USER()"
GRANTS = "SHOW GRANTS FOR CURRENT_USER()"

# The isolation level a session runs at: MySQL 8 and MariaDB 11.1+ name it
# transaction_isolation; older MariaDB only tx_isolation (MySQL 8 dropped that one).
ISOLATION = "SELECT @@SESSION.transaction_isolation"
ISOLATION_OLD_NAME = "SELECT @@SESSION.tx_isolation"
TIME_ZONE = "SELECT @@SESSION.time_zone"

# The server's clock, read between two readings of ours.
SERVER_UTC_NOW = "SELECT UTC_TIMESTAMP(6)"

# The plans' scratch table: an empty copy of prefork_jobs (its columns and indexes),
# renamed to hide the real table from this session alone, so that the plans'
# scratch jobs take no id of the real table (an AUTO_INCREMENT is never rolled
# back). DROP TEMPORARY drops only a temporary table, never the real one.
CREATE_SCRATCH_JOBS = "CREATE TEMPORARY TABLE prefork_doctor_jobs LIKE prefork_jobs"
SCRATCH_AS_JOBS = "ALTER TABLE prefork_doctor_jobs RENAME TO prefork_jobs"
DROP_SCRATCH_COPY = "DROP TEMPORARY TABLE IF EXISTS prefork_doctor_jobs"
DROP_SCRATCH_JOBS = "DROP TEMPORARY TABLE IF EXISTS prefork_jobs"

# Jobs that make a plan the plan of a working queue: an empty table is planned as
# a scan of nothing. Inserted in a transaction that is rolled back
# (queue, job type); executemany sends them as one multi-row INSERT.
PLAN_JOB = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, max_attempts, available_at,"
    " created_at, updated_at)"
    " VALUES (%s, %s, '{}', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

# Before a statement whose plan is wanted. MySQL: the classic table (a server's
# explain_format may be TREE or JSON); MariaDB has only the classic one by default.
EXPLAIN_MYSQL = "EXPLAIN FORMAT=TRADITIONAL "
EXPLAIN_MARIADB = "EXPLAIN "

# The round trip's job, by id and scratch queue (both: a wrong id removes nothing).
REMOVE_SCRATCH_JOB = "DELETE FROM prefork_jobs WHERE id = %s AND queue = %s"

# The server's place in a topology. Whole lists, read once: a name the server does
# not have is absent (MySQL has no wsrep_*, MariaDB no group_replication_*).
GLOBAL_VARIABLES = "SHOW GLOBAL VARIABLES"
GLOBAL_STATUS = "SHOW GLOBAL STATUS"
# As a queue session has it (the session may set it; the account's default may).
SESSION_RETRY_AUTOCOMMIT = "SHOW SESSION VARIABLES LIKE 'wsrep_retry_autocommit'"
# MySQL Group Replication: every member, as this one sees the group.
GROUP_MEMBERS = (
    "SELECT MEMBER_ID, MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE"
    " FROM performance_schema.replication_group_members")
# MySQL: replication channels receiving from a source (Group Replication's own are
# not a replica's). MariaDB counts them in the status Slaves_running instead.
REPLICA_CHANNELS = (
    "SELECT COUNT(*) FROM performance_schema.replication_connection_status"
    " WHERE SERVICE_STATE = 'ON' AND CHANNEL_NAME NOT LIKE 'group_replication%'")
# Supervisors that heartbeat within the supervisor timeout (seconds), and their hosts.
LIVE_SUPERVISORS = (
    "SELECT COUNT(*), COUNT(DISTINCT host) FROM prefork_processes"
    " WHERE state = 'running' AND heartbeat_at > UTC_TIMESTAMP(6) - INTERVAL %s SECOND")

# --- SQLite ---------------------------------------------------------------------------------

JOURNAL_MODE = "PRAGMA journal_mode"
EXPLAIN_SQLITE = "EXPLAIN QUERY PLAN "
REMOVE_SCRATCH_JOB_SQLITE = "DELETE FROM prefork_jobs WHERE id = :id AND queue = :queue"


def explained(prefix: str, statement: str) -> str:
    """The statement with an EXPLAIN prefix: the only composition here."""
    return prefix + statement
