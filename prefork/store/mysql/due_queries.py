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

The limited claim and the supervisor's look for limited work (limits.py) read the
same way, in the range of the limited jobs (limited = 1) of the same index.

Values are bound parameters (%s). Two bounded compositions: due_levels(), the
placeholders of the queues that fill DUE_LEVELS' {queues}, and the range read
({limited}: the index's flag, 0 or 1, as the statements of either range write it);
levels(), the placeholders of the priorities that fill the {levels} field of the
claims' statements (queries.LOCK_NEXT_READY, queries.READY_COUNT,
portable_queries.LOCK_NEXT_READY_IDS, limit_queries.READ_WAITING,
limit_queries.LIMITED_READY_COUNT).
"""

# The priorities with due jobs of some queues ({queues}), without limits or with
# them ({limited}), of those not paused: (queue, priority) rows, each group read
# at its first index entry. One statement, one range of the claim index per queue: a union of one
# statement per queue costs the server a temporary table and a plan per branch,
# four times the time of this one at 20 queues. GROUP BY names the index's
# leading columns: so both servers read the groups by a loose index scan. The
# pause check is in HAVING, once per group found (a primary-key read): in WHERE,
# MariaDB gives up the loose scan for it. ORDER BY NULL: MariaDB would otherwise
# sort the groups (GROUP BY's old implied order); the caller puts the few rows
# in its queues' order.
DUE_LEVELS = (
    "SELECT queue, priority FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue IN ({queues}) AND limited = {limited}"
    " GROUP BY status, queue, limited, priority HAVING MIN(available_at) <= UTC_TIMESTAMP(6)"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states AS states"
    " WHERE states.queue = prefork_jobs.queue AND states.paused = 1)"
    " ORDER BY NULL")


def due_levels(count: int, limited: bool = False) -> str:
    """DUE_LEVELS over `count` queues, of the jobs without limits or with them."""
    return DUE_LEVELS.format(queues=levels(count), limited=int(limited))


def levels(count: int) -> str:
    """The %s list of the priorities a claim reads ({levels} of the claim's statements)."""
    return ", ".join(["%s"] * count)
