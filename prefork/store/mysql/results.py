"""The MySQL store's results and failed attempts (prefork_task_results): what the
completions and the failure path write beside the job's row, in their
transactions, and the reads of `show`, the dashboard and Client.result(). A part
of MySQLStore; its statements are in result_queries.py.
"""
from collections.abc import Sequence
from typing import Any

import pymysql

from ...failures import TRACEBACKS_KEPT, AttemptTraceback, FailedAttempt
from ...jobs import Job
from ...results import JobResult, KeptResult, decoded, default_run
from .result_queries import (
    EXPIRE_RESULTS,
    FAILED_ATTEMPTS,
    FORGET_TRACEBACKS_BEFORE,
    JOB_RESULT,
    OLDEST_KEPT_TRACEBACK,
    RECORD_FAILURE,
)
from .session import MySQLSession, micros


class MySQLResults(MySQLSession):
    def job_result(self, job_id: int) -> JobResult | None:
        rows = self._all(JOB_RESULT, (job_id,))
        if not rows:
            return None
        value, attempt, finished_at, expires_at = rows[0]
        return JobResult(decoded(value), attempt, finished_at, expires_at)

    def failed_attempts(self, job_id: int) -> list[AttemptTraceback]:
        return [AttemptTraceback(*row) for row in self._all(FAILED_ATTEMPTS, (job_id,))]

    def expire_results(self, limit: int = 1000) -> int:
        return self._rowcount(EXPIRE_RESULTS, (limit,))


def result_args(kept: KeptResult) -> tuple[Any, ...]:
    """queries.RECORD_RESULT's parameters."""
    return (kept.worker, kept.started_at, kept.value, micros(kept.ttl), *kept.lease)


def results_args(results: Sequence[KeptResult]) -> tuple[Any, ...]:
    """The parameters of a completion script's RECORD_RESULTs, in turn."""
    return tuple(value for result in results for value in result_args(result))


def record_failure(cursor: pymysql.cursors.Cursor, job: Job, failure: FailedAttempt) -> None:
    """Keep a failed attempt in the caller's transaction, and forget the tracebacks of
    the job's attempts before its last TRACEBACKS_KEPT."""
    run = job.run or default_run()
    cursor.execute(RECORD_FAILURE, (job.id, job.attempt, run.worker, run.started_at,
                                    failure.class_path, failure.traceback))
    cursor.execute(OLDEST_KEPT_TRACEBACK, (job.id, TRACEBACKS_KEPT - 1))
    oldest = cursor.fetchone()
    if oldest is not None:
        cursor.execute(FORGET_TRACEBACKS_BEFORE, (job.id, oldest[0]))
