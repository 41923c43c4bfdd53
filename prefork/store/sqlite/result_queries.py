"""The SQLite store's statements on prefork_task_results (schema 0005 and 0010): every
job's result and failed attempts, one row per attempt that ended in the worker.
The rules of queries.py hold here too (named parameters, times as :now)."""

# A job's result, written right after the completion that made it done, in its
# transaction (only then: the completion's row count says so).
RECORD_RESULT = (
    "INSERT INTO prefork_task_results (job_id, attempt, worker, started_at, finished_at,"
    " return_value, expires_at) SELECT id, attempts, :worker, :started_at, :now, :value,"
    " :expires_at FROM prefork_jobs WHERE id = :id AND status = 'done' AND lease_token = :token")

# A failed attempt, in the transaction that records the failure on the job's row.
RECORD_FAILURE = (
    "INSERT INTO prefork_task_results (job_id, attempt, worker, started_at, finished_at,"
    " exception_class_path, traceback)"
    " VALUES (:id, :attempt, :worker, :started_at, :now, :class_path, :traceback)")

# The tracebacks of a job's attempts before its last :kept ones, forgotten.
FORGET_OLD_TRACEBACKS = (
    "UPDATE prefork_task_results SET traceback = NULL"
    " WHERE job_id = :id AND traceback IS NOT NULL AND id < ("
    "SELECT id FROM prefork_task_results INDEXED BY ix_prefork_task_results_job"
    " WHERE job_id = :id AND traceback IS NOT NULL ORDER BY id DESC LIMIT 1 OFFSET :kept - 1)")

# A done job's newest result that has not expired: the JSON, the attempt, when it
# was written and until when it is kept.
JOB_RESULT = (
    "SELECT r.return_value, r.attempt, r.finished_at, r.expires_at"
    " FROM prefork_task_results AS r INDEXED BY ix_prefork_task_results_job"
    " JOIN prefork_jobs AS j ON j.id = r.job_id"
    " WHERE r.job_id = :id AND j.status = 'done' AND r.return_value IS NOT NULL"
    " AND (r.expires_at IS NULL OR r.expires_at > :now) ORDER BY r.id DESC LIMIT 1")

# The tracebacks a job keeps, oldest first.
FAILED_ATTEMPTS = (
    "SELECT attempt, worker, finished_at, exception_class_path, traceback"
    " FROM prefork_task_results INDEXED BY ix_prefork_task_results_job"
    " WHERE job_id = :id AND traceback IS NOT NULL ORDER BY id")

# Up to :limit expired results, oldest first through the expiry index: the value
# goes, the attempt's row stays (with its job).
EXPIRE_RESULTS = (
    "UPDATE prefork_task_results SET return_value = NULL, expires_at = NULL"
    " WHERE id IN (SELECT id FROM prefork_task_results INDEXED BY ix_prefork_task_results_expiry"
    " WHERE expires_at <= :now ORDER BY expires_at LIMIT :limit)")
