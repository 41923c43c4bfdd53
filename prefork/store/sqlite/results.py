"""The SQLite store's results and failed attempts (prefork_task_results): what the
completions and the failure path write beside the job's row, in their
transactions, and the reads of `show`, the dashboard and Client.result(). A part
of SQLiteStore; its statements are in result_queries.py.
"""
import sqlite3
from contextlib import closing
from datetime import datetime

from ...failures import TRACEBACKS_KEPT, AttemptTraceback, FailedAttempt
from ...jobs import Job, utc_now
from ...results import JobResult, KeptResult, decoded, default_run
from .file import stamp, times
from .result_queries import (
    EXPIRE_RESULTS,
    FAILED_ATTEMPTS,
    FORGET_OLD_TRACEBACKS,
    JOB_RESULT,
    RECORD_FAILURE,
    RECORD_RESULT,
)
from .session import SQLiteSession


class SQLiteResults(SQLiteSession):
    def job_result(self, job_id: int) -> JobResult | None:
        with closing(self._read(JOB_RESULT, {"id": job_id, "now": stamp(utc_now())})) as cursor:
            row = cursor.fetchone()
        if row is None:
            return None
        value, attempt, finished_at, expires_at = row
        return JobResult(decoded(value), attempt, datetime.fromisoformat(finished_at),
                         datetime.fromisoformat(expires_at) if expires_at else None)

    def failed_attempts(self, job_id: int) -> list[AttemptTraceback]:
        with closing(self._read(FAILED_ATTEMPTS, {"id": job_id})) as cursor:
            return [AttemptTraceback(attempt, worker, datetime.fromisoformat(finished_at),
                                     class_path, traceback)
                    for attempt, worker, finished_at, class_path, traceback in cursor.fetchall()]

    def expire_results(self, limit: int = 1000) -> int:
        return self._write_one(EXPIRE_RESULTS, {"limit": limit})


def record_result(cursor: sqlite3.Cursor, kept: KeptResult, now: datetime) -> None:
    """Write a result in the caller's transaction, right after its job's completion."""
    job_id, token = kept.lease
    cursor.execute(RECORD_RESULT, {
        "id": job_id, "token": token, "worker": kept.worker,
        "started_at": stamp(kept.started_at), "value": kept.value,
        **times(now, expires_at=kept.ttl)})


def record_failure(cursor: sqlite3.Cursor, job: Job, failure: FailedAttempt,
                   now: datetime) -> None:
    """Keep a failed attempt in the caller's transaction, and forget the tracebacks of
    the job's attempts before its last TRACEBACKS_KEPT."""
    run = job.run or default_run()
    cursor.execute(RECORD_FAILURE, {
        "id": job.id, "attempt": job.attempt, "worker": run.worker,
        "started_at": stamp(run.started_at), "class_path": failure.class_path,
        "traceback": failure.traceback, "now": stamp(now)})
    cursor.execute(FORGET_OLD_TRACEBACKS, {"id": job.id, "kept": TRACEBACKS_KEPT})
