"""What the SQLite store does for workflows as a whole (store/flows.py in one write
transaction each): enqueue one, add to a batch and close it, retry members, read
progress and a job's place. A part of SQLiteStore; the paths that end members are
in the parts that end jobs (lifecycle.py, cancel.py, operations.py)."""
from collections.abc import Sequence
from contextlib import closing

from ...workflows.model import Enqueued, Place, Progress
from ...workflows.plan import Plan
from ...workflows.spec import Step
from .session import SQLiteSession
from .workflows import SQLiteFlows


class SQLiteMembers(SQLiteSession):
    def enqueue_workflow(self, plan: Plan, key: str | None = None) -> Enqueued:
        with self._write() as cursor:
            enqueued = SQLiteFlows(cursor).insert_plan(plan, key)
        self.ring(plan.ready_jobs())
        return enqueued

    def add_to_batch(self, batch_id: int, steps: Sequence[Step]) -> list[int]:
        with self._write() as cursor:
            job_ids, plan = SQLiteFlows(cursor).add_members(batch_id, steps)
        self.ring(plan.ready_jobs())
        return job_ids

    def close_batch(self, batch_id: int) -> None:
        with self._write() as cursor:
            SQLiteFlows(cursor).close_batch(batch_id)

    def _retry_members(self, job_ids: Sequence[int] | None, queue: str | None,
                       max_attempts: int | None, states: Sequence[str]) -> int:
        """Retry dead (or cancelled) members with their workflows' bookkeeping
        (Flows.retry_members), a bounded batch per transaction."""
        retried, after = 0, 0
        while True:
            with self._write() as cursor:
                count, after = SQLiteFlows(cursor).retry_members(job_ids, queue, max_attempts,
                                                                 states, after)
            retried += count
            if job_ids is not None or not count:
                return retried

    def workflow_progress(self, workflow_id: int) -> Progress | None:
        with closing(self._connection().cursor()) as cursor:
            return SQLiteFlows(cursor).progress(workflow_id)

    def workflow_place(self, job_id: int) -> Place | None:
        with closing(self._connection().cursor()) as cursor:
            return SQLiteFlows(cursor).place(job_id)
