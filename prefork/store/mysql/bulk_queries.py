"""The bulk enqueue's statement (Store.enqueue_many, `enqueue --file`): one
multi-row INSERT per chunk of jobs. PyMySQL's executemany folds into one
statement only VALUES made of bare placeholders, and a job's row needs the
server's clock (UTC_TIMESTAMP) and the limits table, so the rows are written
out here instead: a bounded composition of ENQUEUE_ROW, `count` times, filled
into ENQUEUE_ROWS's {rows} field (enqueue_rows()).
"""

# One job's row: (queue, type, payload, key, priority, max attempts, run at or
# NULL, delay in microseconds, concurrency key ('' for none), type again). As
# queries.ENQUEUE's: `limited` is whether a rule of the type is published, read
# by the primary key of prefork_limits.
ENQUEUE_ROW = (
    "(%s, %s, %s, %s, %s, %s, COALESCE(%s, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND),"
    " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), %s, EXISTS (SELECT 1 FROM prefork_limits"
    " WHERE job_type = %s))")

# Many jobs at once ({rows}); a repeated (queue, key), in the table or earlier in
# the same statement, keeps the existing job: the no-op update leaves the affected
# row count at one per new job.
ENQUEUE_ROWS = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at, concurrency_key, limited)"
    " VALUES {rows} ON DUPLICATE KEY UPDATE id = id")


def enqueue_rows(count: int) -> str:
    """ENQUEUE_ROWS for `count` jobs."""
    return ENQUEUE_ROWS.format(rows=", ".join([ENQUEUE_ROW] * count))
