"""Every statement the MySQL store sends, by name. Nothing here is made by editing
another statement: each is written out in full, and the code asks for it by name.

Values are always bound parameters (%s). Two bounded compositions exist, both
in this module: a list of placeholders for n values (placeholders(), lease_pairs(),
and due_queries.levels()), filled into a statement's {ids}, {queues}, {lease_pairs}
or {levels} field; and a script,
whole statements sent in one round trip (script()). Every time is the server's
UTC_TIMESTAMP(6), so hosts with skewed clocks agree. Statements on one job by id
force the primary key: through the lease index they would lock other workers'
reserved rows and deadlock with them.
"""


def placeholders(count: int) -> str:
    """The %s list of an IN (...) of `count` values."""
    return ", ".join(["%s"] * count)


def lease_pairs(count: int) -> str:
    """The fence of `count` leases: one (id, token) pair of placeholders each,
    OR-ed primary-key lookups."""
    return " OR ".join(["(id = %s AND lease_token = %s)"] * count)


def script(*statements: str) -> str:
    """Whole statements sent as one multi-statement round trip."""
    return "; ".join(statements)


# --- producing ------------------------------------------------------------------------

# Insert one job (queue, type, payload, key, priority, max attempts, run at or
# NULL, delay in microseconds, concurrency key ('' for none), type again); on a
# duplicate (queue, key) make LAST_INSERT_ID() the existing row's id, so the
# caller gets that id and no second row. `limited`: whether a rule of the type is
# published (prefork_limits), read by its primary key in the same statement.
ENQUEUE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at, concurrency_key, limited)"
    " VALUES (%s, %s, %s, %s, %s, %s,"
    " COALESCE(%s, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),"
    " %s, EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = %s))"
    " ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)")

# The bulk form, a multi-row INSERT per chunk of jobs, is bulk_queries.ENQUEUE_ROWS.

# --- claims and group completions: the steps of the scripts below ----------------------

# The ids a claim or a group completion works on live in user variables of the
# session between the steps of one script; a script starts by forgetting the last.
FORGET_BATCH_IDS = "SET @prefork_claimed = NULL, @prefork_completed = NULL"
START_TRANSACTION = "START TRANSACTION"
COMMIT = "COMMIT"

# Lock the next ready jobs without limits (limited = 0: an equality of the claim
# index, so its order is the ORDER BY) of one queue and some of its priorities
# (queue, the priorities ({levels}: due_queries.levels()), queue again for the
# pause check, limit) in index order, skipping rows other claimers hold, and
# note their ids. The priorities are those with due jobs (due_queries.py): each
# one's range ends at its first row not yet due, so no delayed row is read.
# FORCE INDEX: the optimizer must never choose a filesort here, which would lock
# every row it scans. A paused queue is claimed by nobody; its check is not a
# locking read (FOR UPDATE applies to the outer table only).
LOCK_NEXT_READY = (
    "SELECT JSON_ARRAYAGG(id) INTO @prefork_claimed FROM ("
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0 AND priority IN ({levels})"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT %s FOR UPDATE SKIP LOCKED) AS next_jobs")

# Reserve the locked jobs (secret, lease in microseconds, worker, supervisor id).
# Each job gets its own lease token, a mark ('w': a workflow's member, see
# jobs.MEMBER_TOKEN_MARK; '0': any other) and 31 hex digits of SHA2(secret + id):
# unpredictable without the claim's random 16-byte secret, unique per job. FORCE INDEX
# (PRIMARY) on the join: on a big table the optimizer would rather read every
# reserved row through the lease index, locking other workers' jobs.
# Fenced by the state it expects (ready): a lock is only this server's, and on a
# cluster with writers on several nodes (Galera) nothing but this check and the
# commit's certification keeps a job another node took from being taken again.
# And only inside the script's transaction: when the cluster aborts that
# transaction, the statements after the abort may still run, autocommitted
# (schema_queries.NO_AUTOCOMMIT_RETRY); a reservation committed alone would be
# of jobs nobody reads back, charged an attempt when their lease runs out. (In
# the status's comparison, as COMPLETE does: a condition on a variable alone is
# folded into an impossible WHERE when the doctor explains it, autocommitted.)
RESERVE_LOCKED = (
    "UPDATE prefork_jobs AS j FORCE INDEX (PRIMARY)"
    " JOIN JSON_TABLE(@prefork_claimed, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) AS claimed"
    " ON j.id = claimed.id"
    " SET j.status = 'reserved', j.attempts = j.attempts + 1,"
    " j.lease_token = CONCAT(IF(j.workflow_step >= 0, 'w', '0'),"
    " LEFT(SHA2(CONCAT(%s, j.id), 256), 31)),"
    " j.lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, j.locked_by = %s,"
    " j.process_id = %s, j.updated_at = UTC_TIMESTAMP(6)"
    " WHERE j.status = IF(@@SESSION.in_transaction, 'ready', NULL)")

# The claimed jobs, read back after the commit in claim order, in the column
# order claimed_job() unpacks (attempts - 1: each row as it was before the
# reservation), then the token. Only rows reserved with this claim's tokens
# (the secret again; the token column is ASCII): a job the reservation did not
# take is not ours.
READ_BACK_CLAIMED = (
    "SELECT j.id, j.job_type, j.queue, j.payload, j.attempts - 1, j.max_attempts,"
    " j.idempotency_key, j.crashes, j.lease_token"
    " FROM JSON_TABLE(@prefork_claimed, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) AS claimed"
    " JOIN prefork_jobs AS j ON j.id = claimed.id"
    " WHERE j.status = 'reserved'"
    " AND j.lease_token = CONVERT(CONCAT(IF(j.workflow_step >= 0, 'w', '0'),"
    " LEFT(SHA2(CONCAT(%s, j.id), 256), 31)) USING ascii)"
    " ORDER BY j.priority, j.available_at, j.id")

# Of a group of leases ({lease_pairs}), lock in id order the jobs whose lease is
# ours and live, or that are done already with our token (the parent may have
# written a busy child's completion), and note their ids: a JSON array, or NULL.
LOCK_LEASED_GROUP = (
    "SELECT JSON_ARRAYAGG(id) INTO @prefork_completed FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE (status = 'done' OR (status = 'reserved' AND lease_until > UTC_TIMESTAMP(6)))"
    " AND ({lease_pairs}) FOR UPDATE")

# Mark the locked ones that are still reserved done. The token stays on a done
# row: it tells a later group completion that the job was written with that lease.
# A cancellation asked for too late is dropped: the job finished first. Fenced by
# the leases again ({lease_pairs}: their `id` is the job's, hence job_id for the
# list's), like every state change: the lock is only this server's (see RESERVE_LOCKED).
COMPLETE_LOCKED_GROUP = (
    "UPDATE prefork_jobs AS j FORCE INDEX (PRIMARY)"
    " JOIN JSON_TABLE(@prefork_completed, '$[*]' COLUMNS (job_id BIGINT UNSIGNED PATH '$'))"
    " AS completed ON j.id = completed.job_id"
    " SET j.status = 'done', j.lease_until = NULL, j.finished_at = UTC_TIMESTAMP(6),"
    " j.cancel_requested_at = NULL, j.updated_at = UTC_TIMESTAMP(6)"
    " WHERE j.status = 'reserved' AND ({lease_pairs})")

COMPLETED_IDS = "SELECT @prefork_completed"

# --- the scripts: one round trip and one commit each ------------------------------------

# Claim a batch of one queue's due priorities ({levels}): its jobs, then the
# (NULL) completed ids.
CLAIM = script(FORGET_BATCH_IDS, START_TRANSACTION, LOCK_NEXT_READY, RESERVE_LOCKED, COMMIT,
               READ_BACK_CLAIMED, COMPLETED_IDS)

# Finish a group of jobs (a batch's): the ids completed.
COMPLETE_GROUP = script(FORGET_BATCH_IDS, START_TRANSACTION, LOCK_LEASED_GROUP,
                        COMPLETE_LOCKED_GROUP, COMMIT, COMPLETED_IDS)

# Finish a group ({lease_pairs}) and claim the next batch ({levels}) in the same
# transaction.
COMPLETE_AND_CLAIM = script(FORGET_BATCH_IDS, START_TRANSACTION, LOCK_LEASED_GROUP,
                            COMPLETE_LOCKED_GROUP, LOCK_NEXT_READY, RESERVE_LOCKED, COMMIT,
                            READ_BACK_CLAIMED, COMPLETED_IDS)

# --- one job under its lease --------------------------------------------------------------

# How many jobs without limits of one queue and some of its due priorities are
# ready (queue, the priorities ({levels}), queue, limit), counting at most the
# limit, from the claim index without locking: the supervisor's look for its idle
# children, once due_queries.py found due jobs (one such statement per queue, in
# one script). limit_queries.LIMITED_READY_COUNT counts the limited ones.
READY_COUNT = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0 AND priority IN ({levels})"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT %s) AS ready")

# Release needs no live lease: giving back an unstarted claim is always
# safe while the token still matches (nobody else took the job). A job whose
# cancellation is pending ends cancelled instead of ready. MySQL assigns left to
# right, each assignment seeing those before it: every statement here clears
# cancel_requested_at last, after the others read it. Of the claims of
# {lease_pairs}: alone (autocommitted) for one job, in RELEASE_GROUP for a batch.
RELEASE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(cancel_requested_at IS NULL, 'ready', 'cancelled'),"
    " attempts = attempts - 1, lease_token = NULL, lease_until = NULL, locked_by = NULL,"
    " finished_at = IF(cancel_requested_at IS NULL, NULL, UTC_TIMESTAMP(6)),"
    " updated_at = UTC_TIMESTAMP(6), cancel_requested_at = NULL"
    " WHERE status = 'reserved' AND ({lease_pairs})")

# A batch's release in one round trip: lock those still ours in id order (their
# ids are the answer), then release them and commit.
LOCK_RELEASABLE_GROUP = (
    "SELECT id FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE status = 'reserved' AND ({lease_pairs}) ORDER BY id FOR UPDATE")
RELEASE_GROUP = script(START_TRANSACTION, LOCK_RELEASABLE_GROUP, RELEASE, COMMIT)

# The lease fence (id, token): our token, still reserved, lease not yet over.
# Zero rows matched means the lease was lost.
EXTEND = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s"
    " AND lease_until > UTC_TIMESTAMP(6)")

EXTEND_MANY = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, updated_at = UTC_TIMESTAMP(6)"
    " WHERE status = 'reserved' AND lease_until > UTC_TIMESTAMP(6) AND ({lease_pairs})")

# Of some leases, those whose job is done under that same lease (a child may
# have written their completions while the parent extended them).
COUNT_DONE_UNDER_LEASE = ("SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (PRIMARY)"
                          " WHERE status = 'done' AND ({lease_pairs})")

# Expired leases, oldest first, reading the lease index; SKIP LOCKED so a worker
# finishing its job right now is never waited on: (id, whether a workflow's member).
LOCK_EXPIRED = (
    "SELECT id, workflow_step >= 0 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
    " WHERE status = 'reserved' AND lease_until <= UTC_TIMESTAMP(6)"
    " ORDER BY lease_until LIMIT %s FOR UPDATE SKIP LOCKED")

# The locked ones ({ids}) back to ready, or dead when out of attempts, or
# cancelled when their cancellation is pending (cleared last: see RELEASE).
RECOVER_EXPIRED = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(cancel_requested_at IS NOT NULL, 'cancelled',"
    " IF(attempts >= max_attempts, 'dead', 'ready')),"
    " last_error = 'lease expired', lease_token = NULL, lease_until = NULL,"
    " available_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(cancel_requested_at IS NOT NULL OR attempts >= max_attempts,"
    " UTC_TIMESTAMP(6), NULL), cancel_requested_at = NULL"
    " WHERE id IN ({ids}) AND status = 'reserved' AND lease_until <= UTC_TIMESTAMP(6)")

# --- inspection and repair --------------------------------------------------------------------
# An optional queue is one parameter given twice: NULL (all queues) or its name.

GET = (
    "SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts,"
    " max_attempts, crashes, available_at, lease_until, locked_by, last_error, error_history,"
    " created_at, updated_at, finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs WHERE id = %s")

DEAD_JOBS = (
    "SELECT id, queue, job_type, attempts, last_error, finished_at FROM prefork_jobs"
    " WHERE status = 'dead' AND (%s IS NULL OR queue = %s)"
    " ORDER BY finished_at DESC, id DESC LIMIT %s")

# Dead or cancelled jobs ({statuses}) back to ready: (new max_attempts or NULL
# to keep each job's, the statuses, queue or NULL, queue again). `limited` is
# read again: a rule may have been published or removed since the job ended.
# Not a workflow's members (workflow_queries.RETRY_MEMBER retries those).
RETRY_DEAD = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = UTC_TIMESTAMP(6),"
    " max_attempts = COALESCE(%s, max_attempts), updated_at = UTC_TIMESTAMP(6),"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE status IN ({statuses}) AND (%s IS NULL OR queue = %s)"
    " AND COALESCE(workflow_step, -1) < 0")

RETRY_DEAD_IDS = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = UTC_TIMESTAMP(6),"
    " max_attempts = COALESCE(%s, max_attempts), updated_at = UTC_TIMESTAMP(6),"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE status IN ({statuses}) AND (%s IS NULL OR queue = %s) AND id IN ({ids})"
    " AND COALESCE(workflow_step, -1) < 0")

COUNTS = "SELECT status, COUNT(*) FROM prefork_jobs GROUP BY status"

# Depth of some queues ({queues}) for the metrics: only the claim index's ranges
# of the live statuses (its first column), so the millions of done rows are never read.
QUEUE_STATS = (
    "SELECT queue, status, COUNT(*), SUM(available_at <= UTC_TIMESTAMP(6)),"
    " TIMESTAMPDIFF(MICROSECOND, MIN(IF(available_at <= UTC_TIMESTAMP(6), available_at, NULL)),"
    " UTC_TIMESTAMP(6)) / 1e6"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved', 'dead', 'cancelled') AND queue IN ({queues})"
    " GROUP BY queue, status")

# --- the supervisor registry ---------------------------------------------------------------

REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, started_at,"
    " heartbeat_at) VALUES (%s, %s, 'running', %s, %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

# Only a running row beats: one that others pruned stays pruned, and its
# supervisor learns it from the row count.
HEARTBEAT = (
    "UPDATE prefork_processes SET heartbeat_at = UTC_TIMESTAMP(6), queues = %s, workers = %s,"
    " children = %s WHERE id = %s AND state = 'running'")

STOP = ("UPDATE prefork_processes SET state = 'stopped', children = NULL,"
        " heartbeat_at = UTC_TIMESTAMP(6) WHERE id = %s AND state = 'running'")

SILENT = ("SELECT id FROM prefork_processes WHERE state = 'running'"
          " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
          " ORDER BY heartbeat_at LIMIT %s")

# Whoever flips the row to 'pruned' hands back its jobs; the others see 0 rows.
MARK_PRUNED = ("UPDATE prefork_processes SET state = 'pruned', children = NULL"
               " WHERE id = %s AND state = 'running'"
               " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND")

# The reserved jobs of a vanished supervisor: who claimed each (host:pid), how
# long ago its claim or last extension was written (server clock), whether a
# workflow's member. No locking read: RETURN_JOBS_OF checks again what it returns.
JOBS_OF = ("SELECT id, locked_by, TIMESTAMPDIFF(MICROSECOND, updated_at, UTC_TIMESTAMP(6)),"
           " workflow_step >= 0 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
           " WHERE status = 'reserved' AND process_id = %s")

# Those of them ({ids}) whose holder is gone, as lease expiry would return them
# (the attempt was used; cancelled when that is pending), but now instead of when
# each lease runs out.
RETURN_JOBS_OF = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(cancel_requested_at IS NOT NULL, 'cancelled',"
    " IF(attempts >= max_attempts, 'dead', 'ready')), last_error = %s,"
    " lease_token = NULL, lease_until = NULL, available_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(cancel_requested_at IS NOT NULL OR attempts >= max_attempts,"
    " UTC_TIMESTAMP(6), NULL), cancel_requested_at = NULL,"
    " updated_at = UTC_TIMESTAMP(6) WHERE id IN ({ids}) AND status = 'reserved'"
    " AND process_id = %s")

# --- control, status and pruning -----------------------------------------------------------------

# One round trip per poll: the server's clock, the newest restart request for
# this host, and the paused queues.
CONTROL = (
    "SELECT UTC_TIMESTAMP(6),"
    " (SELECT MAX(requested_at) FROM prefork_restarts WHERE host IN ('*', %s)),"
    " (SELECT GROUP_CONCAT(queue SEPARATOR ',') FROM prefork_queue_states WHERE paused = 1)")

REQUEST_RESTART = (
    "INSERT INTO prefork_restarts (host, requested_at)"
    " VALUES (%s, COALESCE(%s, UTC_TIMESTAMP(6)))"
    " ON DUPLICATE KEY UPDATE requested_at = VALUES(requested_at)")

RESTART_REQUESTED = "SELECT requested_at FROM prefork_restarts WHERE host = %s"

SET_PAUSED = (
    "INSERT INTO prefork_queue_states (queue, paused, updated_at)"
    " VALUES (%s, %s, UTC_TIMESTAMP(6))"
    " ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at,"
    " TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) / 1e6 AS heartbeat_age_s"
    " FROM prefork_processes FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running' ORDER BY host, pid")

PAUSED_QUEUES = "SELECT queue FROM prefork_queue_states WHERE paused = 1 ORDER BY queue"

# Per queue, only the live statuses (the claim index starts with status, so
# the millions of done rows are never read), split into due and delayed.
LIVE_COUNTS = (
    "SELECT queue, status, available_at <= UTC_TIMESTAMP(6) AS due, COUNT(*),"
    " TIMESTAMPDIFF(MICROSECOND, MIN(available_at), UTC_TIMESTAMP(6)) / 1e6"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved', 'dead', 'cancelled') GROUP BY queue, status, due")

DONE_SINCE = (
    "SELECT queue, COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_finished)"
    " WHERE status = 'done' AND finished_at >= UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " GROUP BY queue")

# (status, age in microseconds)
COUNT_FINISHED = ("SELECT COUNT(*) FROM prefork_jobs WHERE status = %s"
                  " AND finished_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND")

# Oldest first through the finished index, a bounded batch per statement so
# that no delete holds locks for long.
PRUNE_FINISHED = ("DELETE FROM prefork_jobs WHERE status = %s"
                  " AND finished_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
                  " ORDER BY finished_at LIMIT %s")

PRUNE_PROCESSES = (
    "DELETE FROM prefork_processes WHERE state IN ('stopped', 'pruned')"
    " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND LIMIT %s")

DISCARD_DEAD = "DELETE FROM prefork_jobs WHERE status = 'dead' AND id IN ({ids})"

# The results of Django tasks (schema 0005) go with their jobs: each runs just before
# the statement above it that deletes those jobs (the same rows: same filter, order
# and bound). MySQL allows no LIMIT in a multi-table DELETE, but does in a derived table.
PRUNE_FINISHED_RESULTS = (
    "DELETE r FROM prefork_task_results AS r JOIN (SELECT id FROM prefork_jobs"
    " WHERE status = %s AND finished_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " ORDER BY finished_at LIMIT %s) AS doomed ON r.job_id = doomed.id")
DISCARD_DEAD_RESULTS = (
    "DELETE r FROM prefork_task_results AS r JOIN prefork_jobs AS j ON j.id = r.job_id"
    " WHERE j.status = 'dead' AND j.id IN ({ids})")

# --- after a reconnection: jobs reserved in a supervisor's name that none of its workers holds

# Its reserved jobs, locked until the hand-back below commits: as JOBS_OF's.
STRAYS_OF = ("SELECT id, locked_by, TIMESTAMPDIFF(MICROSECOND, updated_at, UTC_TIMESTAMP(6)),"
             " workflow_step >= 0 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
             " WHERE status = 'reserved' AND process_id = %s FOR UPDATE")

# Those of them ({ids}) given back uncharged, as RELEASE gives back a claim.
RETURN_STRAYS = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(cancel_requested_at IS NULL, 'ready', 'cancelled'),"
    " attempts = attempts - 1, lease_token = NULL, lease_until = NULL, locked_by = NULL,"
    " finished_at = IF(cancel_requested_at IS NULL, NULL, UTC_TIMESTAMP(6)),"
    " updated_at = UTC_TIMESTAMP(6), cancel_requested_at = NULL"
    " WHERE id IN ({ids}) AND status = 'reserved' AND process_id = %s")
