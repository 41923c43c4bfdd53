"""The SQLite side of `prefork-queue bench`: it polls its scratch queue and deletes
its rows afterwards (an admin tool). The textbook baseline and the server counters
are MySQL's only (see store/mysql/bench.py)."""
from contextlib import closing

from .store import SQLiteStore

BENCH_UNFINISHED = ("SELECT COUNT(*) FROM prefork_jobs"
                    " WHERE status IN ('ready', 'reserved') AND queue = :queue")

BENCH_DELETE_QUEUE = "DELETE FROM prefork_jobs WHERE queue = :queue"


def bench_unfinished(store: SQLiteStore, queue: str) -> int:
    """How many jobs of `queue` are ready or reserved."""
    with closing(store._connection().execute(BENCH_UNFINISHED, {"queue": queue})) as cursor:
        return int(cursor.fetchone()[0])


def bench_delete_queue(store: SQLiteStore, queue: str) -> int:
    """Delete every row of a scratch queue; returns how many."""
    return store._write_one(BENCH_DELETE_QUEUE, {"queue": queue})
