"""The SQLite store's cancellation: cancelling jobs by id or by queue and type,
the pending cancellations a supervisor acts on, and the end of a running job it
stopped. A part of SQLiteStore; statements are named in cancel_queries.py.

A ready job is cancelled at once; a running one gets cancel_requested_at, and
ends cancelled when its holder lets go of it (finish_cancelled(), or any path
out of 'reserved' but a completion: see queries.py). SQLite serialises
writers, so the states read in a cancelling transaction are the states it
changes.
"""
import sqlite3
from collections.abc import Sequence
from contextlib import closing

from ...cancellation import CancelReport, joined, report
from ...errors import UserError
from ...jobs import JobStatus, Lease, utc_now
from .cancel_queries import (
    CANCEL_READY,
    CANCEL_REQUESTED,
    CANCEL_STATES,
    FINISH_CANCELLED,
    MATCHING_IN_QUEUE,
    MATCHING_OF_TYPE,
    REQUEST_CANCEL,
)
from .file import stamp
from .queries import placeholders
from .session import SQLiteSession
from .workflows import SQLiteFlows

IDS_PER_STATEMENT = 500   # well below SQLite's bound on a statement's parameters
MATCHING_BATCH = 1000     # jobs per transaction of cancel_matching()


class SQLiteCancellation(SQLiteSession):
    def cancel(self, job_ids: Sequence[int]) -> CancelReport:
        with self._write() as cursor:
            return cancel_on(cursor, job_ids)

    def cancel_matching(self, queue: str | None, job_type: str | None) -> CancelReport:
        if queue is None and job_type is None:
            raise UserError("cancel which jobs? name a queue, a job type or both")
        statement = MATCHING_IN_QUEUE if queue is not None else MATCHING_OF_TYPE
        reports = []
        for status in (JobStatus.READY, JobStatus.WAITING, JobStatus.RESERVED):
            after = 0
            while True:
                params = {"status": status.value, "queue": queue, "job_type": job_type,
                          "after": after, "batch": MATCHING_BATCH}
                with self._write() as cursor:   # one bounded batch per transaction
                    ids = [row[0] for row in cursor.execute(statement, params).fetchall()]
                    reports.append(cancel_on(cursor, ids))
                if len(ids) < MATCHING_BATCH:
                    break
                after = ids[-1]
        return joined(reports)

    def cancel_requested(self, process_id: int) -> set[int]:
        with closing(self._read(CANCEL_REQUESTED, {"process_id": process_id})) as cursor:
            return {row[0] for row in cursor.fetchall()}

    def finish_cancelled(self, lease: Lease) -> bool:
        job_id, token = lease
        with self._write() as cursor:
            cursor.execute(FINISH_CANCELLED, {"id": job_id, "token": token,
                                              "now": stamp(utc_now())})
            if cursor.rowcount != 1:
                return False
            if lease.in_workflow:
                SQLiteFlows(cursor).settle_ids([(job_id, JobStatus.CANCELLED)])
            return True


def cancel_on(cursor: sqlite3.Cursor, job_ids: Sequence[int]) -> CancelReport:
    """Cancel these jobs on the caller's cursor, inside the caller's transaction;
    never commits (prefork.cancel(conn, ...) on an application's connection)."""
    wanted = list(dict.fromkeys(int(job_id) for job_id in job_ids))
    now = stamp(utc_now())
    states: dict[int, str] = {}
    members: list[int] = []
    for start in range(0, len(wanted), IDS_PER_STATEMENT):
        ids, params = placeholders("id", wanted[start:start + IDS_PER_STATEMENT])
        for job_id, status, member in cursor.execute(CANCEL_STATES.format(ids=ids),
                                                     params).fetchall():
            states[job_id] = status
            if member and status in (JobStatus.READY, JobStatus.WAITING):
                members.append(job_id)
        cursor.execute(CANCEL_READY.format(ids=ids), {**params, "now": now})
        cursor.execute(REQUEST_CANCEL.format(ids=ids), {**params, "now": now})
    SQLiteFlows(cursor).settle_ids([(job_id, JobStatus.CANCELLED) for job_id in members])
    return report(wanted, states)

