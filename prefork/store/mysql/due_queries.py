"""Where the due jobs are: the statement a claim, a complete-and-claim and the
supervisor's ready count send first (both dialects), so that they step neither
through the queues without due jobs (one transaction each) nor over the jobs not
yet due (delayed, or waiting for a retry).

The claim index is (status, queue, limited, priority, available_at, id). A read of
`available_at <= now` across priorities walks every not-yet-due row of a priority
before the next priority's due ones; bounded to the due priorities (`priority IN
(...)`), each priority's range ends at its first not-yet-due row. Which priorities
have due jobs the server tells from one index entry per priority: a loose index
scan (EXPLAIN says "Using index for group-by") reads only the first, earliest entry
of each (status, queue, limited, priority) group, as MIN(available_at) asks.

Values are bound parameters (%s). Two bounded compositions: due_levels(), a
DUE_LEVELS_OF_QUEUE per queue; levels(), the placeholders of the priorities that
fill the {levels} field of the claim's statements (queries.LOCK_NEXT_READY,
queries.READY_COUNT, portable_queries.LOCK_NEXT_READY_IDS).
"""

# The priorities with due jobs without limits of one queue, if it is not paused
# (position of the queue in the caller's list, queue, queue again, the most
# priorities wanted): (position, priority) rows, each group read at its first
# index entry, the most urgent first. GROUP BY names the index's leading columns:
# so both servers read the groups by a loose index scan. ORDER BY NULL: MariaDB
# would otherwise sort the groups (GROUP BY's old implied order), and it keeps a
# union branch's ORDER BY only with a LIMIT.
DUE_LEVELS_OF_QUEUE = (
    "SELECT %s AS position, priority FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"
    " GROUP BY status, queue, limited, priority HAVING MIN(available_at) <= UTC_TIMESTAMP(6)"
    " ORDER BY NULL LIMIT %s")

def due_levels(count: int) -> str:
    """Every queue's due priorities in one read: DUE_LEVELS_OF_QUEUE for each of
    `count` queues, UNION ALL. No order is asked of the server (the caller sorts
    the few rows), so it sorts nothing."""
    return " UNION ALL ".join([f"({DUE_LEVELS_OF_QUEUE})"] * count)


def levels(count: int) -> str:
    """The %s list of the priorities a claim reads ({levels} of the claim's statements)."""
    return ", ".join(["%s"] * count)
