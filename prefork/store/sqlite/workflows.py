"""The SQLite store's workflow statements (store/flows.py) on a sqlite3 cursor inside
the caller's write transaction: the store's own, or an application's
(prefork.enqueue_workflow()). Times are this host's clock, read once per cursor's
use (or given). Never commits."""
from collections.abc import Sequence
from typing import Any

from ...jobs import utc_now
from ...limits.rules import NO_KEY
from ..flows import Flows, Owned
from .file import stamp
from .workflow_queries import INSERT_MEMBER, SQL


class SQLiteFlows(Flows):
    sql = SQL

    def __init__(self, cursor: Any, now: str | None = None) -> None:
        """now: the transaction's time as stored text (a job it releases is due from
        then: a claim in the same transaction, at that time, takes it)."""
        super().__init__(cursor)
        self.now = now or stamp(utc_now())

    def params(self) -> dict[str, Any]:
        return {"now": self.now}

    def insert_jobs(self, jobs: Sequence[Owned]) -> list[int]:
        # One statement a job: in-process, SQLite's cost is the transaction, not them.
        ids = []
        for row, owner in jobs:
            job = row.new_job
            self.run(INSERT_MEMBER, queue=job.queue, job_type=job.type, payload=job.payload_text,
                     priority=job.priority, max_attempts=job.max_attempts,
                     concurrency_key=NO_KEY if job.concurrency_key is None
                     else job.concurrency_key, status=row.status.value, workflow_id=owner,
                     step=row.step)
            ids.append(int(self.cursor.lastrowid))
        return ids
