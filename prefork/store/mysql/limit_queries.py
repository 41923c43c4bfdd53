"""Every statement of the MySQL store's concurrency and rate limits (limits.py), by
name, under the rules of queries.py. Both dialects send them as they are: each
is written the way the MySQL 8.0 and 8.4 reference manuals document (row
constructors in IN, FOR UPDATE SKIP LOCKED, INSERT IGNORE, ON DUPLICATE KEY
UPDATE without VALUES()), and MariaDB 10.6+ runs them the same.

Values are bound parameters (%s); {ids} and {types} take queries.placeholders(),
{groups} takes group_pairs(): one (job type, concurrency key) pair each, and
{levels} takes due_queries.levels(): the due priorities of the queue read, which
due_queries.DUE_LEVELS found first, so that no job not yet due is read.
"""


def group_pairs(count: int) -> str:
    """The row constructors of an IN list of `count` groups."""
    return ", ".join(["(%s, %s)"] * count)


# --- publishing the rules ---------------------------------------------------------------

# One rule (type, concurrency, rate count, rate seconds, then the three again),
# replacing the type's earlier one.
UPSERT_RULE = (
    "INSERT INTO prefork_limits (job_type, concurrency, rate_count, rate_seconds, updated_at)"
    " VALUES (%s, %s, %s, %s, UTC_TIMESTAMP(6))"
    " ON DUPLICATE KEY UPDATE concurrency = %s, rate_count = %s, rate_seconds = %s,"
    " updated_at = UTC_TIMESTAMP(6)")

DELETE_RULES = "DELETE FROM prefork_limits WHERE job_type IN ({types})"

# A batch of the live jobs of some types ({types}) whose flag is not yet the one
# wanted (status, the types, the flag, batch): locked, skipping those another
# transaction holds (a job in its handler's transaction is not waited for).
LOCK_TO_FLAG = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_type)"
    " WHERE status = %s AND job_type IN ({types}) AND limited <> %s LIMIT %s"
    " FOR UPDATE SKIP LOCKED")

# (flag, the ids) on the rows LOCK_TO_FLAG holds. updated_at is left alone: it
# says when a holder last wrote its job (prune_silent's JOBS_OF).
SET_LIMITED = "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET limited = %s WHERE id IN ({ids})"

# --- the limited claim (limits.py, steps 1-7) -------------------------------------------

# The running limited jobs per group, in every queue: the reserved range of the
# claim index, as short as the jobs running now. Read before the claim's
# transaction, to pass over the full groups, and in it, under the groups' locks.
COUNT_RUNNING = (
    "SELECT job_type, concurrency_key, COUNT(*) FROM prefork_jobs"
    " FORCE INDEX (ix_prefork_jobs_claim) WHERE status = 'reserved' AND limited = 1"
    " GROUP BY job_type, concurrency_key")

# The published rules of the claimer's types ({types}), by primary key: the ones
# the claim enforces. Read with COUNT_RUNNING before the claim's transaction,
# and again in it, under the groups' locks (READ COMMITTED: the latest commit).
RULES_OF = ("SELECT job_type, concurrency, rate_count, rate_seconds FROM prefork_limits"
            " FORCE INDEX (PRIMARY) WHERE job_type IN ({types})")

# Up to a bound of the due limited jobs of one queue in claim order (queue, its
# due priorities {levels}, queue again for the pause check, the full groups
# {groups}, bound), without locking, with their group's bucket when its row
# exists (NULLs when not) and the server's clock. The derived table is read in
# claim index order (no filesort), each priority's range ending at its first
# job not yet due; the few rows it returns are sorted again by the caller.
READ_WAITING = (
    "SELECT w.id, w.job_type, w.concurrency_key, w.priority, w.available_at, g.tokens,"
    " g.refilled_at, UTC_TIMESTAMP(6) FROM (SELECT id, job_type, concurrency_key, priority,"
    " available_at FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 1 AND priority IN ({levels})"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " AND (job_type, concurrency_key) NOT IN ({groups})"
    " ORDER BY priority, available_at, id LIMIT %s) AS w"
    " LEFT JOIN prefork_limit_groups AS g FORCE INDEX (PRIMARY)"
    " ON g.job_type = w.job_type AND g.concurrency_key = w.concurrency_key")

# A group's row, made before the claim's transaction and autocommitted: inside
# it, the duplicate check would hold a shared lock on another claimer's row.
# (type, key, first tokens)
ENSURE_GROUP = (
    "INSERT IGNORE INTO prefork_limit_groups (job_type, concurrency_key, tokens, refilled_at)"
    " VALUES (%s, %s, %s, UTC_TIMESTAMP(6))")

# Lock some groups' rows ({groups}), skipping those another claimer holds: their
# buckets, and the server's clock.
LOCK_GROUPS = (
    "SELECT job_type, concurrency_key, tokens, refilled_at, UTC_TIMESTAMP(6)"
    " FROM prefork_limit_groups FORCE INDEX (PRIMARY)"
    " WHERE (job_type, concurrency_key) IN ({groups}) FOR UPDATE SKIP LOCKED")

# The planned jobs ({ids}) that are still ready, locked by primary key: the
# reservation (portable_queries.RESERVE_IDS) takes those.
LOCK_PLANNED = (
    "SELECT id FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id IN ({ids}) AND status = 'ready' AND limited = 1 FOR UPDATE SKIP LOCKED")

# A group's bucket after the claim's starts (tokens, refilled at, type, key).
WRITE_BUCKET = (
    "UPDATE prefork_limit_groups SET tokens = %s, refilled_at = %s"
    " WHERE job_type = %s AND concurrency_key = %s")

# --- the supervisor's look, status and pruning ------------------------------------------

# How many limited jobs of one queue and some of its due priorities are due
# (queue, the priorities {levels}, queue, limit), counting at most the limit,
# whether or not their groups have room: the range of the claim index that
# queries.READY_COUNT leaves out.
LIMITED_READY_COUNT = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 1 AND priority IN ({levels})"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT %s) AS ready")

# The published rules: (type, concurrency, rate count, rate seconds).
RULES = "SELECT job_type, concurrency, rate_count, rate_seconds FROM prefork_limits"

# Each group of some limited types ({types}) with jobs running or waiting (due):
# the live ranges of the status-and-type index of those types only (a join with
# prefork_limits would read every live job: no index range serves an IN list
# of statuses joined on the type).
LIMIT_USAGE = (
    "SELECT job_type, concurrency_key, SUM(status = 'reserved') AS running,"
    " SUM(status = 'ready' AND available_at <= UTC_TIMESTAMP(6)) AS waiting"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_type)"
    " WHERE status IN ('ready', 'reserved') AND job_type IN ({types}) AND limited = 1"
    " GROUP BY job_type, concurrency_key HAVING running > 0 OR waiting > 0"
    " ORDER BY job_type, concurrency_key")

# Groups whose bucket was last refilled that long ago (age in microseconds,
# batch). A claim makes a group's row anew when it needs it, with one token: no
# more than the bucket held by then. (A slot is a reserved job, never a row here.)
PRUNE_LIMIT_GROUPS = (
    "DELETE FROM prefork_limit_groups WHERE refilled_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " ORDER BY refilled_at LIMIT %s")
