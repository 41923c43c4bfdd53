"""The SQLite side of the workflow scenarios of `prefork-queue bench --workflows`
(see store/mysql/workflow_bench.py): their count of unfinished jobs, the times
their jobs were written done, and the deletion of their workflow rows."""
from contextlib import closing
from datetime import datetime, timezone

from .queries import placeholders
from .store import SQLiteStore

BENCH_FLOW_UNFINISHED = ("SELECT COUNT(*) FROM prefork_jobs"
                         " WHERE status IN ('waiting', 'ready', 'reserved') AND queue = :queue")

BENCH_FINISHED_AT = ("SELECT id, finished_at FROM prefork_jobs"
                     " WHERE status = 'done' AND queue = :queue")

BENCH_KEYED_WORKFLOWS = "SELECT id FROM prefork_workflows WHERE idempotency_key LIKE :pattern"

BENCH_DELETE_WORKFLOWS = "DELETE FROM prefork_workflows WHERE id IN ({ids}) OR root_id IN ({ids})"


def bench_flow_unfinished(store: SQLiteStore, queue: str) -> int:
    """How many jobs of `queue` are waiting, ready or reserved."""
    with closing(store._connection().execute(BENCH_FLOW_UNFINISHED, {"queue": queue})) as cursor:
        return int(cursor.fetchone()[0])


def bench_finished_at(store: SQLiteStore, queue: str) -> dict[int, float]:
    """{job id: when it was written done (seconds since the epoch)} of `queue`'s done jobs."""
    with closing(store._connection().execute(BENCH_FINISHED_AT, {"queue": queue})) as cursor:
        return {int(job_id): datetime.fromisoformat(finished).replace(
            tzinfo=timezone.utc).timestamp() for job_id, finished in cursor.fetchall()}


def bench_delete_workflows(store: SQLiteStore, key_prefix: str) -> int:
    """Delete the workflows whose keys start with `key_prefix` (no LIKE wildcard in it)
    and those nested in them; how many rows."""
    with closing(store._connection().execute(BENCH_KEYED_WORKFLOWS,
                                             {"pattern": key_prefix + "%"})) as cursor:
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return 0
    listed, params = placeholders("workflow", ids)
    return store._write_one(BENCH_DELETE_WORKFLOWS.format(ids=listed), params)
