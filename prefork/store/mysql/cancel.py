"""The MySQL store's cancellation, the same in both dialects: cancel() and
cancel_matching() (a ready job ends cancelled now, a running one is marked for
its supervisor to stop), what a supervisor asks about its running jobs, and
cancel_on(), which prefork.cancel() runs in an application's transaction. A part
of MySQLStore; its statements are named in cancel_queries.py."""
import functools
from collections.abc import Sequence
from typing import Any

from ...cancellation import CancelReport, joined, report
from ...errors import UserError
from ...jobs import JobStatus, Lease
from .cancel_queries import (
    CANCEL_READY,
    CANCEL_REQUESTED,
    FINISH_CANCELLED,
    LOCK_STATES,
    MATCHING_IN_QUEUE,
    MATCHING_OF_TYPE,
    REQUEST_CANCEL,
)
from .queries import placeholders
from .session import MySQLSession
from ..flows import text
from .workflows import MySQLFlows

MATCH_BATCH = 1000   # jobs cancel_matching() cancels per transaction


def cancel_on(cursor: Any, job_ids: Sequence[int]) -> CancelReport:
    """Cancel these jobs on the caller's cursor (any MySQL driver's), inside the
    caller's transaction, their rows locked by primary key; never commits."""
    asked = list(dict.fromkeys(job_ids))
    if not asked:
        return CancelReport([], [], [], [])
    cursor.execute(LOCK_STATES.format(ids=placeholders(len(asked))), asked)
    rows = cursor.fetchall()
    states = {int(job_id): JobStatus(text(status)) for job_id, status, _ in rows}
    ready = [job_id for job_id in asked if states.get(job_id) in UNSTARTED]
    running = [job_id for job_id in asked if states.get(job_id) is JobStatus.RESERVED]
    if ready:
        cursor.execute(CANCEL_READY.format(ids=placeholders(len(ready))), ready)
        members = {int(job_id) for job_id, _, member in rows if member}
        MySQLFlows(cursor).settle_ids([(job_id, JobStatus.CANCELLED) for job_id in ready
                            if job_id in members])
    if running:
        cursor.execute(REQUEST_CANCEL.format(ids=placeholders(len(running))), running)
    return report(asked, states)


# What a cancel ends at once: jobs not started (a workflow's waiting ones too).
UNSTARTED = (JobStatus.READY, JobStatus.WAITING)


class MySQLCancel(MySQLSession):
    def cancel(self, job_ids: Sequence[int]) -> CancelReport:
        return self._retry_contention(functools.partial(self._cancel_now, job_ids))

    def _cancel_now(self, job_ids: Sequence[int]) -> CancelReport:
        with self._transaction() as cursor:
            return cancel_on(cursor, job_ids)

    def cancel_matching(self, queue: str | None, job_type: str | None) -> CancelReport:
        if queue is None and job_type is None:
            raise UserError("cancel needs job ids, or a queue and/or a job type")
        reports = []
        for status in (JobStatus.READY, JobStatus.WAITING, JobStatus.RESERVED):
            after = 0
            while True:
                ids = [row[0] for row in self._all(*_matching(status, queue, job_type, after))]
                if ids:   # some may have finished since they were read
                    reports.append(self.cancel(ids))
                if len(ids) < MATCH_BATCH:
                    break
                after = ids[-1]
        # Jobs matched by a filter, not named: none of them is "missing".
        return joined(reports)._replace(missing=[])

    def cancel_requested(self, process_id: int) -> set[int]:
        return {row[0] for row in self._all(CANCEL_REQUESTED, (process_id,))}

    def finish_cancelled(self, lease: Lease) -> bool:
        if not lease.in_workflow:
            return self._rowcount(FINISH_CANCELLED, lease) == 1
        return self._retry_contention(functools.partial(self._finish_member_cancelled, lease))

    def _finish_member_cancelled(self, lease: Lease) -> bool:
        with self._transaction() as cursor:
            if cursor.execute(FINISH_CANCELLED, lease) != 1:
                return False
            MySQLFlows(cursor).settle_ids([(lease.job_id, JobStatus.CANCELLED)])
            return True


def _matching(status: JobStatus, queue: str | None, job_type: str | None,
              after: int) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of the next batch of cancel_matching(): by the
    queue's index when a queue is named, else by the type's."""
    if queue is not None:
        return MATCHING_IN_QUEUE, (status.value, queue, job_type, job_type, after, MATCH_BATCH)
    return MATCHING_OF_TYPE, (status.value, job_type, after, MATCH_BATCH)
