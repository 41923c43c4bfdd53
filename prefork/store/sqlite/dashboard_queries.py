"""Every statement of the SQLite store's dashboard reads and rollup writes, by name
(the rest of the store's are in queries.py). Values are bound parameters (:name);
times are stored text (file.py). INDEXED BY makes a statement fail rather than
run with another plan than the one its index was made for (job_search.py says
which filter reads which index).

The Jobs page's reads: a range of one index, newest first, below :before and
from :id_min on (the id bounds of a time range), with the other filters checked
on each row (:queue, :job_type, :status NULL: any; created_at in [:created_from,
:created_to)). The list columns are get()'s but the payload and error history.
"""

FIND_BY_STATUS = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at FROM prefork_jobs INDEXED BY ix_prefork_jobs_status"
    " WHERE status = :status AND id < :before AND id >= :id_min"
    " AND (:queue IS NULL OR queue = :queue) AND (:job_type IS NULL OR job_type = :job_type)"
    " AND created_at >= :created_from AND created_at < :created_to"
    " ORDER BY id DESC LIMIT :limit")

FIND_BY_STATUS_QUEUE = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at FROM prefork_jobs INDEXED BY ix_prefork_jobs_status_queue"
    " WHERE status = :status AND queue = :queue AND id < :before AND id >= :id_min"
    " AND (:job_type IS NULL OR job_type = :job_type)"
    " AND created_at >= :created_from AND created_at < :created_to"
    " ORDER BY id DESC LIMIT :limit")

FIND_BY_STATUS_TYPE = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at FROM prefork_jobs INDEXED BY ix_prefork_jobs_status_type"
    " WHERE status = :status AND job_type = :job_type AND id < :before AND id >= :id_min"
    " AND (:queue IS NULL OR queue = :queue)"
    " AND created_at >= :created_from AND created_at < :created_to"
    " ORDER BY id DESC LIMIT :limit")

# Keys in [:key_low, :key_high) (job_search.key_range; with no bound, :key_high
# is a BLOB, which SQLite orders after every TEXT), in BINARY collation: exactly
# the keys that start with the prefix. Both bounds bind the index range.
FIND_BY_KEY = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at FROM prefork_jobs INDEXED BY ix_prefork_jobs_key"
    " WHERE idempotency_key >= :key_low AND idempotency_key < :key_high"
    " AND id < :before AND id >= :id_min AND (:status IS NULL OR status = :status)"
    " AND (:queue IS NULL OR queue = :queue) AND (:job_type IS NULL OR job_type = :job_type)"
    " AND created_at >= :created_from AND created_at < :created_to"
    " ORDER BY id DESC LIMIT :limit")

# A key prefix alone: the page's ids read from the key index alone (each entry
# holds its rowid), sorted there, then their rows by id.
FIND_BY_KEY_ONLY = (
    "SELECT j.id, j.queue, j.job_type, j.idempotency_key, j.status, j.priority, j.attempts,"
    " j.max_attempts, j.crashes, j.available_at, j.lease_until, j.locked_by, j.last_error,"
    " j.created_at, j.updated_at, j.finished_at, j.concurrency_key, j.limited,"
    " j.cancel_requested_at FROM (SELECT id FROM prefork_jobs"
    " INDEXED BY ix_prefork_jobs_key WHERE idempotency_key >= :key_low"
    " AND idempotency_key < :key_high"
    " AND id < :before AND id >= :id_min ORDER BY id DESC LIMIT :limit) AS page"
    " JOIN prefork_jobs AS j ON j.id = page.id ORDER BY j.id DESC")

FIND_BY_ID = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at FROM prefork_jobs"
    " WHERE id = :job_id AND id < :before AND (:status IS NULL OR status = :status)"
    " AND (:queue IS NULL OR queue = :queue) AND (:job_type IS NULL OR job_type = :job_type)"
    " AND (:key_low IS NULL OR (idempotency_key >= :key_low AND idempotency_key < :key_high))"
    " AND created_at >= :created_from AND created_at < :created_to")

# The id bounds of a time range (job_search._id_bounds): the first job created
# from :since on (the range's end + slack), the last one created before :until
# (its start - slack).
FIRST_CREATED_FROM = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_created"
    " WHERE created_at >= :since ORDER BY created_at, id LIMIT 1")

LAST_CREATED_BEFORE = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_created"
    " WHERE created_at < :until ORDER BY created_at DESC, id DESC LIMIT 1")

# The four reads of a page without a state filter see one snapshot.
BEGIN_READ = "BEGIN DEFERRED"
END_READ = "COMMIT"

# --- the overview ---------------------------------------------------------------------

# Live counts from the claim index (never a done row), as (queue, status, due,
# count, oldest available_at): the ready and reserved ranges split by
# available_at; the dead and cancelled ranges only counted per queue.
LIVE_DUE_COUNTS = (
    "SELECT queue, status, available_at <= :now AS due, COUNT(*), MIN(available_at)"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('ready', 'reserved') GROUP BY queue, status, due")

ENDED_COUNTS = (
    "SELECT queue, status, 1, COUNT(*), NULL FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('dead', 'cancelled') GROUP BY queue, status")

QUEUE_STATES = "SELECT queue, paused FROM prefork_queue_states"

# Per queue, the rollup's last hour: done, failed, and done in the recent minutes.
ROLLUP_LAST_HOUR = (
    "SELECT queue, SUM(done), SUM(failed),"
    " SUM(CASE WHEN minute >= :recent_from AND minute < :current THEN done ELSE 0 END)"
    " FROM prefork_minutes WHERE minute >= :hour_ago GROUP BY queue")

THROUGHPUT = (
    "SELECT minute, SUM(done), SUM(failed), SUM(dead) FROM prefork_minutes"
    " WHERE minute >= :since AND (:queue IS NULL OR queue = :queue)"
    " GROUP BY minute ORDER BY minute")

# --- the rollup's writes ----------------------------------------------------------------

# A supervisor's final counts of one minute, queue and type: they replace what
# it wrote before for that row (see schema/sqlite/0004_dashboard.sql).
WRITE_MINUTE = (
    "INSERT INTO prefork_minutes (minute, queue, job_type, process_id, host, done, failed,"
    " dead, run_seconds)"
    " VALUES (:minute, :queue, :job_type, :process_id, :host, :done, :failed, :dead,"
    " :run_seconds)"
    " ON CONFLICT (minute, queue, job_type, process_id) DO UPDATE SET host = excluded.host,"
    " done = excluded.done, failed = excluded.failed, dead = excluded.dead,"
    " run_seconds = excluded.run_seconds")

# Oldest first, a bounded batch per statement, as PRUNE_FINISHED.
PRUNE_MINUTES = (
    "DELETE FROM prefork_minutes WHERE (minute, queue, job_type, process_id) IN"
    " (SELECT minute, queue, job_type, process_id FROM prefork_minutes"
    " WHERE minute < :before ORDER BY minute LIMIT :batch)")
