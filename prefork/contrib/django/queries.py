"""The results' SQL (schema/*/0005_task_results.sql), one text for both dialects: it
runs on Django's cursors and on the store's, which take %s placeholders on both."""

# One row per attempt that ended in the worker: return_value on success, the
# exception's class path (and traceback, when allowed) on failure.
INSERT_RESULT = (
    "INSERT INTO prefork_task_results (job_id, attempt, worker, started_at, finished_at,"
    " return_value, exception_class_path, traceback) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")

JOB_OF_RESULT = (
    "SELECT job_type, queue, payload, status, attempts, locked_by, created_at, updated_at,"
    " finished_at FROM prefork_jobs WHERE id = %s")

ATTEMPTS_OF_RESULT = (
    "SELECT worker, started_at, return_value, exception_class_path, traceback"
    " FROM prefork_task_results WHERE job_id = %s ORDER BY id")
