"""The MySQL side of the workflow scenarios of `prefork-queue bench --workflows`:
their count of unfinished jobs (waiting ones too: a chain's later steps), the
times their jobs were written done, and the deletion of their workflow rows. An
admin tool's statements, like bench.py's."""
from datetime import datetime, timezone

from .queries import placeholders
from .store import MySQLStore

# Jobs of a queue not ended yet, waiting ones too, read from the claim index.
BENCH_FLOW_UNFINISHED = (
    "SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('waiting', 'ready', 'reserved') AND queue = %s")

# The done jobs of a queue and when each was written done (the server's clock, in
# the transaction that ended it and released what came after it).
BENCH_FINISHED_AT = (
    "SELECT id, finished_at FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_queue)"
    " WHERE status = 'done' AND queue = %s")

# The outermost workflows the bench enqueued: their keys start with its scratch queue's name.
BENCH_KEYED_WORKFLOWS = "SELECT id FROM prefork_workflows WHERE idempotency_key LIKE %s"

# Those ({ids}) and every workflow nested in them.
BENCH_DELETE_WORKFLOWS = "DELETE FROM prefork_workflows WHERE id IN ({ids}) OR root_id IN ({ids})"


def bench_flow_unfinished(store: MySQLStore, queue: str) -> int:
    """How many jobs of `queue` are waiting, ready or reserved."""
    return int(store._one(BENCH_FLOW_UNFINISHED, (queue,))[0])


def bench_finished_at(store: MySQLStore, queue: str) -> dict[int, float]:
    """{job id: when it was written done (seconds since the epoch)} of `queue`'s done jobs."""
    return {int(job_id): _epoch(finished) for job_id, finished
            in store._all(BENCH_FINISHED_AT, (queue,))}


def bench_delete_workflows(store: MySQLStore, key_prefix: str) -> int:
    """Delete the workflows whose keys start with `key_prefix` (no LIKE wildcard in it)
    and those nested in them; how many rows."""
    ids = [row[0] for row in store._all(BENCH_KEYED_WORKFLOWS, (key_prefix + "%",))]
    if not ids:
        return 0
    listed = placeholders(len(ids))
    return store._rowcount(BENCH_DELETE_WORKFLOWS.format(ids=listed), (*ids, *ids))


def _epoch(moment: datetime) -> float:
    return moment.replace(tzinfo=timezone.utc).timestamp()
