"""The MySQL store's cancellation, the same in both dialects: cancel() and
cancel_matching() (a ready job ends cancelled now, a running one is marked for
its supervisor to stop), what a supervisor asks about its running jobs, and
cancel_on(), which prefork.cancel() runs in an application's transaction. A part
of MySQLStore; its statements are named in cancel_queries.py."""
import functools
from collections.abc import Sequence
from typing import Any

from ...cancellation import CancelReport
from ...errors import UserError
from ...jobs import FINISHED_STATES, JobStatus, Lease
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

MATCH_BATCH = 1000   # jobs cancel_matching() cancels per transaction


def cancel_on(cursor: Any, job_ids: Sequence[int]) -> CancelReport:
    """Cancel these jobs on the caller's cursor (any MySQL driver's), inside the
    caller's transaction, their rows locked by primary key; never commits."""
    asked = list(dict.fromkeys(job_ids))
    if not asked:
        return CancelReport([], [], [], [])
    cursor.execute(LOCK_STATES.format(ids=placeholders(len(asked))), asked)
    states = {int(job_id): JobStatus(_text(status)) for job_id, status in cursor.fetchall()}
    ready = [job_id for job_id in asked if states.get(job_id) is JobStatus.READY]
    running = [job_id for job_id in asked if states.get(job_id) is JobStatus.RESERVED]
    if ready:
        cursor.execute(CANCEL_READY.format(ids=placeholders(len(ready))), ready)
    if running:
        cursor.execute(REQUEST_CANCEL.format(ids=placeholders(len(running))), running)
    return CancelReport(ready, running,
                        [job_id for job_id in asked if states.get(job_id) in FINISHED_STATES],
                        [job_id for job_id in asked if job_id not in states])


def _text(value: Any) -> str:
    """An ENUM as text: some drivers hand it over as bytes."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


class MySQLCancel(MySQLSession):
    def cancel(self, job_ids: Sequence[int]) -> CancelReport:
        return self._retry_contention(functools.partial(self._cancel_now, job_ids))

    def _cancel_now(self, job_ids: Sequence[int]) -> CancelReport:
        with self._transaction() as cursor:
            return cancel_on(cursor, job_ids)

    def cancel_matching(self, queue: str | None, job_type: str | None) -> CancelReport:
        if queue is None and job_type is None:
            raise UserError("cancel needs job ids, or a queue and/or a job type")
        cancelled: list[int] = []
        stopping: list[int] = []
        finished: list[int] = []
        for status in (JobStatus.READY, JobStatus.RESERVED):
            after = 0
            while True:
                ids = [row[0] for row in self._all(*_matching(status, queue, job_type, after))]
                if ids:
                    report = self.cancel(ids)
                    cancelled += report.cancelled
                    stopping += report.stopping
                    finished += report.finished   # finished since they were read
                if len(ids) < MATCH_BATCH:
                    break
                after = ids[-1]
        return CancelReport(cancelled, stopping, finished, [])

    def cancel_requested(self, process_id: int) -> set[int]:
        return {row[0] for row in self._all(CANCEL_REQUESTED, (process_id,))}

    def finish_cancelled(self, lease: Lease) -> bool:
        return self._rowcount(FINISH_CANCELLED, lease) == 1


def _matching(status: JobStatus, queue: str | None, job_type: str | None,
              after: int) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of the next batch of cancel_matching(): by the
    queue's index when a queue is named, else by the type's."""
    if queue is not None:
        return MATCHING_IN_QUEUE, (status.value, queue, job_type, job_type, after, MATCH_BATCH)
    return MATCHING_OF_TYPE, (status.value, job_type, after, MATCH_BATCH)
