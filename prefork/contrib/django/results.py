"""get_result(): a job's row and its attempts' rows read through Django's connection,
as the framework's TaskResult."""
import json
from datetime import datetime
from typing import Any, NamedTuple, Sequence

from ...jobs import FINISHED_STATES, JobStatus, utc_now
from . import compat, enqueued, execution
from .enqueued import aware
from .queries import ATTEMPTS_OF_RESULT, JOB_OF_RESULT

# Django's task states have no cancelled one: a cancelled task did not succeed.
STATUS = {JobStatus.READY: "READY", JobStatus.RESERVED: "RUNNING",
          JobStatus.DONE: "SUCCESSFUL", JobStatus.DEAD: "FAILED",
          JobStatus.CANCELLED: "FAILED", JobStatus.WAITING: "READY"}


class JobRow(NamedTuple):
    job_type: str
    queue: str
    payload: str
    status: str
    attempts: int
    locked_by: str | None
    created_at: Any
    updated_at: Any
    finished_at: Any


class AttemptRow(NamedTuple):
    worker: str
    started_at: Any
    return_value: str | None
    exception_class_path: str | None
    traceback: str | None
    expires_at: Any


def read(backend_alias: str, database: str, result_id: str) -> Any:
    """The TaskResult of job `result_id`; TaskResultDoesNotExist when there is no such
    job or it is no task of this backend (plain prefork jobs share the table)."""
    from django.db import connections  # type: ignore[import-untyped, import-not-found, unused-ignore]
    job_id = _job_id(result_id)
    with connections[database].cursor() as cursor:
        cursor.execute(JOB_OF_RESULT, [job_id])
        found = cursor.fetchone()
        task = execution.known(found[0]) if found else None
        if task is None or enqueued.alias_of(json.loads(found[2]), task) != backend_alias:
            raise compat.TaskResultDoesNotExist(f"no task result {result_id!r} in backend "
                                                f"{backend_alias!r}")
        cursor.execute(ATTEMPTS_OF_RESULT, [job_id])
        attempts = [AttemptRow(*row) for row in cursor.fetchall()]
    return _result(task, result_id, JobRow(*found), attempts)


def _job_id(result_id: str) -> int:
    text = str(result_id)
    if not text.isdigit() or len(text) > 20:
        raise compat.TaskResultDoesNotExist(f"no task result {result_id!r}: ids are job ids")
    return int(text)


def _result(registered: Any, result_id: str, job: JobRow,
            attempts: Sequence[AttemptRow]) -> Any:
    payload = json.loads(job.payload)
    status = JobStatus(job.status)
    task = enqueued.task_of(registered, job.queue, payload)
    # What get_result() shows is the reading backend's choice (its store_traceback).
    shows_tracebacks = enqueued.backend_named(task.backend).prefork_options.store_traceback
    running = status is JobStatus.RESERVED
    starts = [_time(row.started_at) for row in attempts] + ([_time(job.updated_at)] if running
                                                            else [])
    result = compat.TaskResult(
        task=task, id=result_id, status=compat.TaskResultStatus[STATUS[status]],
        enqueued_at=enqueued.enqueued_at(payload, _time(job.created_at)),
        started_at=aware(starts[0] if starts else None),
        last_attempted_at=aware(starts[-1] if starts else None),
        finished_at=aware(_time(job.finished_at)) if status in FINISHED_STATES
        else None,
        args=payload.get("args", []), kwargs=payload.get("kwargs", {}), backend=task.backend,
        errors=[compat.TaskError(exception_class_path=row.exception_class_path,
                                 traceback=_as_printed(row.traceback) if shows_tracebacks
                                 else "")
                for row in attempts if row.exception_class_path],
        worker_ids=_worker_ids(job, attempts, running))
    now = utc_now()
    kept = [row.return_value for row in attempts
            if row.return_value is not None and not _expired(row.expires_at, now)]
    if status is JobStatus.DONE and kept:
        object.__setattr__(result, "_return_value", json.loads(kept[-1]))
    return result


def _worker_ids(job: JobRow, attempts: Sequence[AttemptRow], running: bool) -> list[str]:
    """One entry per attempt (the framework counts attempts as len(worker_ids)): the
    workers that recorded one, the current claimer for the running attempt, and the
    last claimer for attempts that left no row (their worker died)."""
    workers = [row.worker for row in attempts] + ([job.locked_by or ""] if running else [])
    missing = max(0, job.attempts - len(workers))
    return workers + [job.locked_by or ""] * missing


def _expired(expires_at: Any, now: datetime) -> bool:
    """Whether a result kept until expires_at (None: as long as its job) is gone."""
    until = _time(expires_at)
    return until is not None and until <= now


def _time(value: Any) -> datetime | None:
    """A stored time (MySQL's DATETIME, or SQLite's text) as a naive UTC datetime."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _as_printed(traceback: str | None) -> str:
    """A kept traceback as Python prints one (Django's TaskError has it so): ending in
    a newline."""
    return f"{traceback}\n" if traceback else ""
