"""The SQLite side of `prefork-queue bench`: it polls its scratch queue and deletes
its rows afterwards (an admin tool). The textbook baseline and the server counters
are MySQL's only (see store/mysql/bench.py)."""
from contextlib import closing

from .store import SQLiteStore

BENCH_UNFINISHED = ("SELECT COUNT(*) FROM prefork_jobs"
                    " WHERE status IN ('ready', 'reserved') AND queue = :queue")

BENCH_DELETE_QUEUE = "DELETE FROM prefork_jobs WHERE queue = :queue"

# The most reserved jobs of one limit group (type, concurrency key) in a queue now, 0
# when none: the limit scenarios' check that a slot (a reserved job) is never taken twice.
BENCH_MOST_RESERVED_PER_GROUP = (
    "SELECT COALESCE(MAX(reserved), 0) FROM (SELECT COUNT(*) AS reserved FROM prefork_jobs"
    " WHERE status = 'reserved' AND queue = :queue GROUP BY job_type, concurrency_key)")

# How many of a queue's done jobs were enqueued as limited (a rule for their type was
# published): the limit scenarios' check that their limited run was one.
BENCH_LIMITED_DONE = ("SELECT COUNT(*) FROM prefork_jobs"
                      " WHERE status = 'done' AND queue = :queue AND limited = 1")

# What the limit scenarios leave besides their jobs: the rules their supervisor
# published for the bench's two limited types, and the groups' buckets, whose
# concurrency keys all start with the scratch queue's name.
BENCH_DELETE_LIMITS = "DELETE FROM prefork_limits WHERE job_type IN (:first_type, :second_type)"
BENCH_DELETE_LIMIT_GROUPS = (
    "DELETE FROM prefork_limit_groups WHERE job_type IN (:first_type, :second_type)"
    " AND concurrency_key LIKE :key_pattern")


def bench_unfinished(store: SQLiteStore, queue: str) -> int:
    """How many jobs of `queue` are ready or reserved."""
    with closing(store._connection().execute(BENCH_UNFINISHED, {"queue": queue})) as cursor:
        return int(cursor.fetchone()[0])


def bench_delete_queue(store: SQLiteStore, queue: str) -> int:
    """Delete every row of a scratch queue; returns how many."""
    return store._write_one(BENCH_DELETE_QUEUE, {"queue": queue})


def bench_most_reserved_per_group(store: SQLiteStore, queue: str) -> int:
    """The most reserved jobs any one limit group of `queue` has now."""
    with closing(store._connection().execute(BENCH_MOST_RESERVED_PER_GROUP,
                                             {"queue": queue})) as cursor:
        return int(cursor.fetchone()[0])


def bench_limited_done(store: SQLiteStore, queue: str) -> int:
    """How many done jobs of `queue` were enqueued as limited."""
    with closing(store._connection().execute(BENCH_LIMITED_DONE, {"queue": queue})) as cursor:
        return int(cursor.fetchone()[0])


def bench_delete_limits(store: SQLiteStore, job_types: tuple[str, str], key_prefix: str) -> None:
    """Delete the rules of the two limited `job_types` and their groups whose
    concurrency keys start with `key_prefix` (letters, digits, '-' and ':')."""
    types = {"first_type": job_types[0], "second_type": job_types[1]}
    store._write_one(BENCH_DELETE_LIMIT_GROUPS, {**types, "key_pattern": key_prefix + "%"})
    store._write_one(BENCH_DELETE_LIMITS, types)
