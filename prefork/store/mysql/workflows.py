"""The MySQL store's workflow statements (store/flows.py) on any DB-API cursor of a
MySQL driver, inside the caller's transaction: the store's own, or an
application's (prefork.enqueue_workflow()). A workflow's jobs go in many rows a
statement, as the bulk enqueue's do (bulk.py). Never commits."""
from collections.abc import Sequence
from typing import Any

from ...limits.rules import NO_KEY
from ..flows import Flows, Owned
from .bulk import chunks
from .queries import placeholders
from .workflow_queries import INSERT_MEMBERS, INSERTED_MEMBERS, SQL, member_rows


class MySQLFlows(Flows):
    sql = SQL

    def params(self) -> dict[str, Any]:
        return {}   # the server's clock: UTC_TIMESTAMP(6) in the statements

    def insert_jobs(self, jobs: Sequence[Owned]) -> list[int]:
        if not jobs:
            return []
        first_id, start = None, 0
        for chunk in chunks([job.new_job for job, _ in jobs]):
            rows = jobs[start:start + len(chunk)]
            self.cursor.execute(INSERT_MEMBERS.format(rows=member_rows(len(rows))),
                                [value for row in rows for value in _member_args(row)])
            first_id = self.cursor.lastrowid if first_id is None else first_id
            start += len(chunk)
        # Ids rise in the order rows are inserted (on a cluster, by the node's step).
        workflows = sorted({owner for _, owner in jobs})
        self.cursor.execute(INSERTED_MEMBERS.format(ids=placeholders(len(workflows))),
                            (first_id, *workflows))
        job_ids = [int(row[0]) for row in self.cursor.fetchall()]
        assert len(job_ids) == len(jobs), "a workflow's jobs read back"
        return job_ids


def _member_args(owned: Owned) -> tuple[Any, ...]:
    row, owner = owned
    job = row.new_job
    return (job.queue, job.type, job.payload_text, job.priority, job.max_attempts,
            NO_KEY if job.concurrency_key is None else job.concurrency_key, job.type,
            row.status.value, owner, row.step)
