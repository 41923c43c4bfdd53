"""Every statement of the MySQL store's dashboard reads and rollup writes, by name
(the rest of the store's are in queries.py). Both dialects send these as they
are: each is written the way the MySQL 8.0 and 8.4 reference manuals document
(FORCE INDEX, LIKE ... ESCAPE, INSERT ... ON DUPLICATE KEY UPDATE without
VALUES(), single-table DELETE ... ORDER BY ... LIMIT, START TRANSACTION WITH
CONSISTENT SNAPSHOT, READ ONLY), and MariaDB 10.6+ runs them the same.

Values are bound parameters, by name (%(name)s). The Jobs page's reads: a range
of one index, newest first, below %(before)s and from %(id_min)s on (the id
bounds of a time range), with the other filters checked on each row (queue,
job_type, status NULL: any; created_at in [created_from, created_to)). FORCE
INDEX: the optimizer must not trade the index's id order for a sort of every
match. The list columns are get()'s but the payload and error history.
"""

FIND_BY_STATUS = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status)"
    " WHERE status = %(status)s AND id < %(before)s AND id >= %(id_min)s"
    " AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND (%(job_type)s IS NULL OR job_type = %(job_type)s)"
    " AND created_at >= %(created_from)s AND created_at < %(created_to)s"
    " ORDER BY id DESC LIMIT %(limit)s")

FIND_BY_STATUS_QUEUE = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_queue)"
    " WHERE status = %(status)s AND queue = %(queue)s AND id < %(before)s"
    " AND id >= %(id_min)s AND (%(job_type)s IS NULL OR job_type = %(job_type)s)"
    " AND created_at >= %(created_from)s AND created_at < %(created_to)s"
    " ORDER BY id DESC LIMIT %(limit)s")

FIND_BY_STATUS_TYPE = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_type)"
    " WHERE status = %(status)s AND job_type = %(job_type)s AND id < %(before)s"
    " AND id >= %(id_min)s AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND created_at >= %(created_from)s AND created_at < %(created_to)s"
    " ORDER BY id DESC LIMIT %(limit)s")

# The keys LIKE 'prefix%' with !, % and _ escaped by ! (job_search.like_pattern):
# a range of the key index. LIKE, not >= and <: utf8mb4_bin pads with spaces in
# comparisons, LIKE compares character by character.
FIND_BY_KEY = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_key)"
    " WHERE idempotency_key LIKE %(key_pattern)s ESCAPE '!'"
    " AND id < %(before)s AND id >= %(id_min)s AND (%(status)s IS NULL OR status = %(status)s)"
    " AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND (%(job_type)s IS NULL OR job_type = %(job_type)s)"
    " AND created_at >= %(created_from)s AND created_at < %(created_to)s"
    " ORDER BY id DESC LIMIT %(limit)s")

# A key prefix alone: the page's ids read from the key index alone (each entry
# holds its id), sorted there, then their rows by primary key; a broad prefix
# sorts index entries, not rows.
FIND_BY_KEY_ONLY = (
    "SELECT j.id, j.queue, j.job_type, j.idempotency_key, j.status, j.priority, j.attempts,"
    " j.max_attempts, j.crashes, j.available_at, j.lease_until, j.locked_by, j.last_error,"
    " j.created_at, j.updated_at, j.finished_at, j.concurrency_key, j.limited,"
    " j.cancel_requested_at FROM (SELECT id FROM prefork_jobs"
    " FORCE INDEX (ix_prefork_jobs_key) WHERE idempotency_key LIKE %(key_pattern)s ESCAPE '!'"
    " AND id < %(before)s AND id >= %(id_min)s ORDER BY id DESC LIMIT %(limit)s) AS page"
    " JOIN prefork_jobs AS j FORCE INDEX (PRIMARY) ON j.id = page.id ORDER BY j.id DESC")

FIND_BY_ID = (
    "SELECT id, queue, job_type, idempotency_key, status, priority, attempts, max_attempts,"
    " crashes, available_at, lease_until, locked_by, last_error, created_at, updated_at,"
    " finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id = %(job_id)s AND id < %(before)s AND (%(status)s IS NULL OR status = %(status)s)"
    " AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND (%(job_type)s IS NULL OR job_type = %(job_type)s)"
    " AND (%(key_pattern)s IS NULL OR idempotency_key LIKE %(key_pattern)s ESCAPE '!')"
    " AND created_at >= %(created_from)s AND created_at < %(created_to)s")

# The id bounds of a time range (job_search._id_bounds): the first job created
# from %(since)s on (the range's end + slack), the last one created before
# %(until)s (its start - slack).
FIRST_CREATED_FROM = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_created)"
    " WHERE created_at >= %(since)s ORDER BY created_at, id LIMIT 1")

LAST_CREATED_BEFORE = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_created)"
    " WHERE created_at < %(until)s ORDER BY created_at DESC, id DESC LIMIT 1")

# The reads of one page or overview see one snapshot: the session reads at READ
# COMMITTED (a snapshot per statement), so this one transaction asks for more.
REPEATABLE_READ_NEXT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
BEGIN_SNAPSHOT = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
END_SNAPSHOT = "COMMIT"

# --- the overview -----------------------------------------------------------------------

# Live counts from the claim index (never a done row), in the rows
# job_search.overviews() reads: (queue, status, due, count, oldest age s). The
# ready and reserved ranges split by available_at; the dead and cancelled
# ranges, often the longest, only counted per queue (a GROUP BY in index order,
# no temporary table).
LIVE_DUE_COUNTS = (
    "SELECT queue, status, available_at <= UTC_TIMESTAMP(6) AS due, COUNT(*),"
    " TIMESTAMPDIFF(MICROSECOND, MIN(available_at), UTC_TIMESTAMP(6)) / 1e6"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved') GROUP BY queue, status, due")

DEAD_COUNTS = (
    "SELECT queue, status, 1, COUNT(*), NULL FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('dead', 'cancelled') GROUP BY status, queue")

QUEUE_STATES = "SELECT queue, paused FROM prefork_queue_states"

# Per queue, the rollup's last hour (a range of the primary key): done, failed,
# and done in the recent minutes.
ROLLUP_LAST_HOUR = (
    "SELECT queue, SUM(done), SUM(failed),"
    " SUM(CASE WHEN minute >= %(recent_from)s AND minute < %(current)s THEN done ELSE 0 END)"
    " FROM prefork_minutes WHERE minute >= %(hour_ago)s GROUP BY queue")

THROUGHPUT = (
    "SELECT minute, SUM(done), SUM(failed), SUM(dead) FROM prefork_minutes"
    " WHERE minute >= %(since)s AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " GROUP BY minute ORDER BY minute")

# --- the rollup's writes ---------------------------------------------------------------------

# A supervisor's final counts of one minute, queue and type replace what it wrote
# before for that row (the values given again, not VALUES(): deprecated in MySQL
# 8.0.20+). The worker account's INSERT and UPDATE suffice.
WRITE_MINUTE = (
    "INSERT INTO prefork_minutes (minute, queue, job_type, process_id, host, done, failed,"
    " dead, run_seconds)"
    " VALUES (%(minute)s, %(queue)s, %(job_type)s, %(process_id)s, %(host)s, %(done)s,"
    " %(failed)s, %(dead)s, %(run_seconds)s)"
    " ON DUPLICATE KEY UPDATE host = %(host)s, done = %(done)s, failed = %(failed)s,"
    " dead = %(dead)s, run_seconds = %(run_seconds)s")

# (age in microseconds, batch) oldest first, a bounded batch per statement.
PRUNE_MINUTES = (
    "DELETE FROM prefork_minutes WHERE minute < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " ORDER BY minute LIMIT %s")
