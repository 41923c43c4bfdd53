"""The results' SQL (schema/*/0005_task_results.sql, 0010_job_results.sql), one text
for both dialects, run on Django's cursors (%s placeholders on both). The worker
writes the rows as it does every job's (prefork/store/*/result_queries.py)."""

JOB_OF_RESULT = (
    "SELECT job_type, queue, payload, status, attempts, locked_by, created_at, updated_at,"
    " finished_at FROM prefork_jobs WHERE id = %s")

# One row per attempt that ended in the worker: return_value on success (until
# expires_at), the exception's class path and its traceback on failure (the
# traceback of the job's last three failed attempts only).
ATTEMPTS_OF_RESULT = (
    "SELECT worker, started_at, return_value, exception_class_path, traceback, expires_at"
    " FROM prefork_task_results WHERE job_id = %s ORDER BY id")
