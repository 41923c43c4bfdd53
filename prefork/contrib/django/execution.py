"""The worker's side: a Django task registered as the prefork handler of its module
path, run with the framework's TaskResult, context and signals; its outcome written
where get_result() reads it.

A successful attempt's return value is the job's result (prefork/results.py),
written in the transaction that marks the job done (job.transaction()), before
task_finished is sent. A failed attempt is kept by the worker as every job's is
(its exception's class path and traceback, with the failure, in one transaction).
"""
import asyncio
import inspect
import json
from typing import Any

from ... import registry, results
from ...errors import CommitConflict, JobCancelled, LeaseLost, PermanentError, QuickStop
from ...failures import ErrorDetail, ErrorWriter, class_path, kept_traceback
from ...jobs import Job, utc_now
from ...logs import current_host_pid
from . import compat, enqueued
from .context import context_of
from .enqueued import aware
from .options import Options

# The worker's own interruptions and a lost completion: no failed attempt of the task.
NOT_A_FAILURE = (QuickStop, JobCancelled, LeaseLost, CommitConflict)


class ResultRefused(results.ResultRefused):
    """The return value cannot be stored (not JSON, or over max_result_bytes): the
    task fails for good, since running it again returns the same."""


class KnownTask:
    """A task of ours with the TASKS backend that runs this job of it."""

    def __init__(self, task: Any, backend: Any) -> None:
        self.task = task
        self.alias: str = backend.alias          # the TASKS alias
        self.options: Options = backend.prefork_options
        self.sender: type = type(backend)        # what the signals name as their sender


# module path -> its task: the registry get_result() and the worker look tasks up in.
_KNOWN: dict[str, Any] = {}


def register(task: Any) -> None:
    """Make `task` the handler of jobs of its module path (the first one seen: the
    copies `task.using(...)` makes run the same function)."""
    path = task.module_path
    if path not in _KNOWN:
        _KNOWN[path] = task
        registry.handler(path)(run_job)


def known(path: str) -> Any | None:
    """The registered task of a module path, or None."""
    return _KNOWN.get(path)


def run_job(job: Job) -> None:
    """Every task's handler: the job run with the backend that enqueued it, as TASKS
    configures that backend now."""
    task = _KNOWN[job.type]
    Attempt(KnownTask(task, enqueued.backend_named(enqueued.alias_of(job.payload, task))),
            job).run()


class Attempt:
    """One run of a task in the worker."""

    def __init__(self, known_task: KnownTask, job: Job) -> None:
        self.known = known_task
        self.job = job
        self.worker = current_host_pid()
        self.started = utc_now()
        payload = job.payload
        self.result = compat.TaskResult(
            task=enqueued.task_of(known_task.task, job.queue, payload), id=str(job.id),
            status=compat.TaskResultStatus.RUNNING,
            enqueued_at=enqueued.enqueued_at(payload, None), started_at=aware(self.started),
            last_attempted_at=aware(self.started), finished_at=None,
            args=payload.get("args", []), kwargs=payload.get("kwargs", {}),
            backend=known_task.alias, errors=[],
            # attempts is len(worker_ids): the context's attempt number is the job's.
            worker_ids=[self.worker] * job.attempt)

    def run(self) -> None:
        compat.task_started.send(sender=self.known.sender, task_result=self.result)
        try:
            value = json.loads(self.returned_json(self.call()))
            with self.job.transaction():
                # Kept with the completion (result_ttl); None too: get_result() reads
                # when the task started from the attempt's row.
                self.job.result = results.NULL if value is None else value
        except NOT_A_FAILURE:
            raise
        except BaseException as exc:   # sys.exit() too: FAILED, as Django's immediate backend
            self.failed(exc)
            raise
        self.finish(compat.TaskResultStatus.SUCCESSFUL, return_value=value)

    def call(self) -> Any:
        task, result = self.result.task, self.result
        args = [context_of(result, self.job), *result.args] \
            if task.takes_context else list(result.args)
        if inspect.iscoroutinefunction(task.func):
            return asyncio.run(task.func(*args, **result.kwargs))
        return task.func(*args, **result.kwargs)

    def returned_json(self, value: Any) -> str:
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ResultRefused(f"return value is not JSON: {type(exc).__name__}") from None
        size = len(text.encode("utf-8"))
        limit = self.known.options.max_result_bytes
        if size > limit:
            raise ResultRefused(f"return value is {size} bytes, over the limit of {limit} "
                                "(OPTIONS max_result_bytes)")
        return text

    def failed(self, exc: BaseException) -> None:
        """The attempt's error in the TaskResult of the signals (the worker keeps it for
        get_result()); the task reads FAILED once no retry follows. Its traceback there
        is frames and class only: no message of the exception leaves by a signal."""
        text = kept_traceback(ErrorWriter(ErrorDetail.CLASS).traceback(exc)) \
            if self.known.options.store_traceback else ""
        self.result.errors.append(compat.TaskError(exception_class_path=class_path(exc),
                                                   traceback=text))
        if isinstance(exc, PermanentError) or self.job.attempt >= self.job.max_attempts:
            self.finish(compat.TaskResultStatus.FAILED)

    def finish(self, status: Any, return_value: Any = None) -> None:
        object.__setattr__(self.result, "status", status)
        object.__setattr__(self.result, "finished_at", aware(utc_now()))
        object.__setattr__(self.result, "_return_value", return_value)
        compat.task_finished.send(sender=self.known.sender, task_result=self.result)




def registered() -> list[str]:
    """The module paths of the tasks registered as handlers."""
    return sorted(_KNOWN)
