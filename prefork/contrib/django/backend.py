"""TaskBackend: Django's Tasks framework on the prefork queue.

    TASKS = {"default": {"BACKEND": "prefork.contrib.django.TaskBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"database": "default"}}}

`task.enqueue()` inserts the job through Django's connection for OPTIONS["database"],
inside the current transaction.atomic() (a rollback leaves no job); once the
transaction commits, it rings this host's idle workers and sends task_enqueued. Django's priorities (-100..100,
larger first) are the queue's negated (smaller first): 100 -> -100, 0 -> 0.
"""
import functools
import logging
from typing import Any

from ... import client
from ...errors import UserError
from ...jobs import JOB_TYPE_PATTERN, QUEUE_PATTERN, TOO_DEEP_TO_ENQUEUE
from . import compat, enqueued, execution, results
from .options import Options

logger = logging.getLogger("prefork.contrib.django")


class TaskBackend(compat.BaseTaskBackend):  # type: ignore[misc]
    """The Tasks backend (`TASKS = {"default": {"BACKEND": "prefork.contrib.django.TaskBackend",
    ...}}`): `enqueue()` writes the job in the caller's transaction on the `OPTIONS["database"]`
    alias, and `get_result()` reads a task's state, attempts, errors and return value."""

    supports_defer = True
    supports_async_task = True   # run with asyncio.run() in the worker
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.prefork_options = Options.parsed(alias, self.options)
        self.database = self.prefork_options.database
        for queue in sorted(self.queues):
            if not QUEUE_PATTERN.fullmatch(queue):
                from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped, import-not-found, unused-ignore]
                raise ImproperlyConfigured(f"TASKS[{alias!r}]['QUEUES'] has {queue!r}: a "
                                           "queue name is 1-64 of A-Z a-z 0-9 _ . : -")

    def validate_task(self, task: Any) -> None:
        """The framework's checks, then ours: the module path is the job type. Every
        task built for this backend passes here, which registers it as a handler."""
        super().validate_task(task)
        if not JOB_TYPE_PATTERN.fullmatch(task.module_path):
            raise compat.InvalidTask(f"Task path {task.module_path!r} is not a job type "
                                     "(1-128 of A-Z a-z 0-9 _ . : -)")
        execution.register(task)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Write the task's job in the open transaction of the backend's database (idle
        workers of this host are woken once it commits); its result, READY."""
        from django.db import connections, transaction  # type: ignore[import-untyped, import-not-found, unused-ignore]
        result, payload = self.prepared(task, args, kwargs)
        with transaction.atomic(using=self.database):
            raw = connections[self.database].connection   # atomic() has connected it
            job_id = client.enqueue(
                raw, task.module_path, payload,
                run_at=enqueued.naive_utc(task.run_after) if task.run_after else None,
                **self.job_options(task))
            object.__setattr__(result, "id", str(job_id))
            announce(self.database, raw, [task.queue_name], [result])
        return result

    def prepared(self, task: Any, args: Any, kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """The task checked, its READY result (args and kwargs normalised as the framework
        does, or its TypeError; no id yet) and its job's payload (enqueued.py)."""
        from django.utils import timezone  # type: ignore[import-untyped, import-not-found, unused-ignore]
        self.validate_task(task)
        enqueued_at = timezone.now()
        try:
            result = compat.TaskResult(   # normalises args and kwargs, or raises TypeError
                task=task, id="", status=compat.TaskResultStatus.READY,
                enqueued_at=enqueued_at, started_at=None, last_attempted_at=None,
                finished_at=None, args=args, kwargs=kwargs, backend=self.alias, errors=[],
                worker_ids=[])
        except RecursionError:   # the normalisation recurses: nested far past our limit
            raise UserError(TOO_DEEP_TO_ENQUEUE) from None
        return result, enqueued.written(task, result.args, result.kwargs, self.alias,
                                        enqueued_at)

    def job_options(self, task: Any) -> dict[str, Any]:
        """The task's job's queue, priority (Django's negated) and attempts."""
        return {"queue": task.queue_name, "priority": -task.priority,
                "max_attempts": self.prefork_options.max_attempts}

    def get_result(self, result_id: str) -> Any:
        """The task's result by id (the job id): its status, attempts, errors, times and
        return value."""
        return results.read(self.alias, self.database, result_id)


def announce(database: str, raw_connection: Any, queues: list[str], results: list[Any]
             ) -> None:
    """Once the open transaction on `database` commits and its jobs are public: ring
    this host's idle workers of each queue, then send task_enqueued for each result (a
    rolled-back enqueue never happened, for them as for the workers)."""
    from django.db import transaction  # type: ignore[import-untyped, import-not-found, unused-ignore]
    for queue in dict.fromkeys(queues):
        transaction.on_commit(functools.partial(_ring, raw_connection, queue),
                              using=database, robust=True)
    for result in results:
        transaction.on_commit(functools.partial(compat.task_enqueued.send,
                                                type(enqueued.backend_named(result.backend)),
                                                task_result=result), using=database)


def _ring(raw_connection: Any, queue: str) -> None:
    """After the commit: wake an idle worker of this host for the new job."""
    client.notify(raw_connection, queue)
