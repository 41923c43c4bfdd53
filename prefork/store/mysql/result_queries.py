"""The MySQL store's statements on prefork_task_results (schema 0005 and 0010): every
job's result and failed attempts, one row per attempt that ended in the worker.
Both dialects send them as they are (only what the MySQL 8.0 and 8.4 manuals
document); the rules of queries.py hold here too.
"""

# A job's result, written after its completion in the same transaction (worker,
# started at, JSON, seconds kept in microseconds, id, token): a row only for a
# job done under this lease, which no completion before ours can have made done
# (the worker leaves nobody else a completion with a result to write).
RECORD_RESULT = (
    "INSERT INTO prefork_task_results (job_id, attempt, worker, started_at, finished_at,"
    " return_value, expires_at) SELECT id, attempts, %s, %s, UTC_TIMESTAMP(6), %s,"
    " UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id = %s AND status = 'done' AND lease_token = %s")

# A failed attempt (job id, attempt, worker, started at, class path, traceback), in
# the transaction that records the failure on the job's row.
RECORD_FAILURE = (
    "INSERT INTO prefork_task_results (job_id, attempt, worker, started_at, finished_at,"
    " exception_class_path, traceback) VALUES (%s, %s, %s, %s, UTC_TIMESTAMP(6), %s, %s)")

# The oldest traceback of the job (id) still to keep (offset: how many newer ones
# are kept), then every older one forgotten (job id, that row's id): a job keeps
# its last few, whatever the number of its attempts.
OLDEST_KEPT_TRACEBACK = (
    "SELECT id FROM prefork_task_results FORCE INDEX (ix_prefork_task_results_job)"
    " WHERE job_id = %s AND traceback IS NOT NULL ORDER BY id DESC LIMIT 1 OFFSET %s")
FORGET_TRACEBACKS_BEFORE = (
    "UPDATE prefork_task_results FORCE INDEX (ix_prefork_task_results_job)"
    " SET traceback = NULL WHERE job_id = %s AND id < %s AND traceback IS NOT NULL")

# A done job's newest result that has not expired (id): the JSON, the attempt, when
# it was written and until when it is kept.
JOB_RESULT = (
    "SELECT r.return_value, r.attempt, r.finished_at, r.expires_at"
    " FROM prefork_task_results AS r FORCE INDEX (ix_prefork_task_results_job)"
    " JOIN prefork_jobs AS j ON j.id = r.job_id"
    " WHERE r.job_id = %s AND j.status = 'done' AND r.return_value IS NOT NULL"
    " AND (r.expires_at IS NULL OR r.expires_at > UTC_TIMESTAMP(6))"
    " ORDER BY r.id DESC LIMIT 1")

# The tracebacks a job keeps (id), oldest first.
FAILED_ATTEMPTS = (
    "SELECT attempt, worker, finished_at, exception_class_path, traceback"
    " FROM prefork_task_results FORCE INDEX (ix_prefork_task_results_job)"
    " WHERE job_id = %s AND traceback IS NOT NULL ORDER BY id")

# Up to a bound of expired results, oldest first through the expiry index: the value
# goes, the attempt's row stays (with its job).
EXPIRE_RESULTS = (
    "UPDATE prefork_task_results FORCE INDEX (ix_prefork_task_results_expiry)"
    " SET return_value = NULL, expires_at = NULL"
    " WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT %s")

# The rows go with their jobs: each runs just before the statement of queries.py
# that deletes those jobs (the same rows: same filter, order and bound). MySQL
# allows no LIMIT in a multi-table DELETE, but does in a derived table.
PRUNE_FINISHED_RESULTS = (
    "DELETE r FROM prefork_task_results AS r JOIN (SELECT id FROM prefork_jobs"
    " WHERE status = %s AND finished_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " ORDER BY finished_at LIMIT %s) AS doomed ON r.job_id = doomed.id")
DISCARD_DEAD_RESULTS = (
    "DELETE r FROM prefork_task_results AS r JOIN prefork_jobs AS j ON j.id = r.job_id"
    " WHERE j.status = 'dead' AND j.id IN ({ids})")
