"""The statements of the mysql dialect that differ from the mariadb dialect's
(queries.py): the claims and the group completions, and two upserts. Every
other statement of queries.py is already written the way the MySQL 8.0 and 8.4
reference manuals both document, and the mysql dialect sends it as is.

What the mariadb dialect's versions use and these avoid: user variables set by
a statement (`SELECT ... INTO @var`), JSON_ARRAYAGG, JSON_TABLE over a user
variable (the manuals name a constant, a column or a function call as its
argument), a locking read inside a derived table, and VALUES() in ON DUPLICATE
KEY UPDATE (deprecated since MySQL 8.0.20). What remains: a plain locking read
(`SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED`), whose ids the
code binds into the next statement, and single-table UPDATEs by primary key.

Values are bound parameters (%s); {ids}, {lease_pairs} and {levels} take the
placeholder lists of queries.placeholders(), queries.lease_pairs() and
due_queries.levels().
"""

# Lock the next ready jobs without limits (limited = 0, an equality of the claim
# index) of one queue and some of its due priorities (queue, the priorities
# ({levels}: due_queries.levels()), queue again for the pause check, limit) in
# claim index order, skipping rows other claimers hold: their ids. The pause
# check is a subquery, which the outer locking clause does not lock.
LOCK_NEXT_READY_IDS = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0 AND priority IN ({levels})"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT %s FOR UPDATE SKIP LOCKED")

# Reserve the locked jobs ({ids}; secret, lease in microseconds, worker,
# supervisor id, then the ids). The token of each job is derived from the
# claim's secret and its id, as the mariadb dialect's RESERVE_LOCKED does, and
# like it the reservation is fenced by the state it expects (ready).
RESERVE_IDS = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = 'reserved', attempts = attempts + 1,"
    " lease_token = CONCAT(IF(workflow_step >= 0, 'w', '0'),"
    " LEFT(SHA2(CONCAT(%s, id), 256), 31)),"
    " lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, locked_by = %s,"
    " process_id = %s, updated_at = UTC_TIMESTAMP(6) WHERE id IN ({ids}) AND status = 'ready'")

# The reserved jobs ({ids}, then the secret) in claim order, still locked (read
# before the commit), in the column order claimed_job() unpacks, then the token:
# only those reserved with this claim's tokens.
READ_BACK_IDS = (
    "SELECT id, job_type, queue, payload, attempts - 1, max_attempts, idempotency_key,"
    " crashes, lease_token FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id IN ({ids}) AND status = 'reserved'"
    " AND lease_token = CONVERT(CONCAT(IF(workflow_step >= 0, 'w', '0'),"
    " LEFT(SHA2(CONCAT(%s, id), 256), 31)) USING ascii)"
    " ORDER BY priority, available_at, id")

# Of a group of leases ({lease_pairs}), mark done the jobs whose lease is ours and
# live. The token stays on a done row: it tells DONE_UNDER_LEASES, and any later
# group completion, that the job was finished under that lease. A cancellation
# asked for too late is dropped: the job finished first.
COMPLETE_LEASED = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_until = NULL,"
    " finished_at = UTC_TIMESTAMP(6), cancel_requested_at = NULL, updated_at = UTC_TIMESTAMP(6)"
    " WHERE status = 'reserved' AND lease_until > UTC_TIMESTAMP(6) AND ({lease_pairs})")

# Of a group of leases, the jobs done under them: by COMPLETE_LEASED just now,
# or earlier (a busy child may have written its own completion).
DONE_UNDER_LEASES = ("SELECT id FROM prefork_jobs FORCE INDEX (PRIMARY)"
                     " WHERE status = 'done' AND ({lease_pairs})")

# queries.REQUEST_RESTART with the time given again instead of VALUES(): (host,
# time or NULL for now, the same time again).
REQUEST_RESTART = (
    "INSERT INTO prefork_restarts (host, requested_at)"
    " VALUES (%s, COALESCE(%s, UTC_TIMESTAMP(6)))"
    " ON DUPLICATE KEY UPDATE requested_at = COALESCE(%s, UTC_TIMESTAMP(6))")

# queries.SET_PAUSED likewise: (queue, paused 0/1, paused again).
SET_PAUSED = (
    "INSERT INTO prefork_queue_states (queue, paused, updated_at)"
    " VALUES (%s, %s, UTC_TIMESTAMP(6))"
    " ON DUPLICATE KEY UPDATE paused = %s, updated_at = UTC_TIMESTAMP(6)")

# Every mysql-dialect session runs in MySQL 8.0's and 8.4's default SQL mode,
# whatever the server's: the mode it was written and tested in (here, on
# MariaDB, too: ONLY_FULL_GROUP_BY and the strict checks are MariaDB's too).
MYSQL_SQL_MODE = (
    "SET SESSION sql_mode = 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,"
    "NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'")
