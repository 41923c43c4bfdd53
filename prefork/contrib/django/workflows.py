"""Django tasks in workflows: a task and its arguments as a step (job()) that the plain
prefork.chain() and prefork.group() take, and enqueue_workflow() on Django's connection,
inside the caller's transaction, as task.enqueue() writes a task's job.

    from prefork.contrib.django import enqueue_workflow, job

    flow = prefork.chain(job(charge, order.id),
                         prefork.group([job(reserve, line) for line in lines],
                                       then=job(ship, order.id)))
    with transaction.atomic():
        order.save()
        enqueued = enqueue_workflow(flow, key=f"order-{order.id}")

Each step's job holds what TaskBackend.enqueue() writes (enqueued.py), so it runs as
that task, with its signals, its OPTIONS and get_result().
"""
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...errors import UserError
from ...workflows.api import enqueue_workflow as enqueue_plain
from ...workflows.spec import Chain, Flow, Group, JobSpec, Step, job as plain_job
from . import compat, results
from .backend import announce


@dataclass(frozen=True)
class TaskSpec(JobSpec):
    """A Django task's job in a workflow (job() makes it): its TaskResult, READY and
    without an id until the workflow is enqueued, and the database it goes to."""
    result: Any
    database: str


class EnqueuedTasks(NamedTuple):
    """A workflow of tasks enqueued: its id, its jobs' ids in the order they were listed
    (a group's `then` after its members), and the TaskResult of each (None for a job
    made with prefork.job(), which is no task)."""
    id: int
    job_ids: list[int]
    results: list[Any]


def job(task: Any, /, *args: Any, **kwargs: Any) -> TaskSpec:
    """`task(*args, **kwargs)` as a step of a workflow, for prefork.chain() and
    prefork.group(): the job task.enqueue(*args, **kwargs) would write, on the task's
    queue, with its priority and its backend's max_attempts; its enqueued_at is now.
    The workflow starts it, so the task has no run_after. A one-line UserError for a task of another backend."""
    if not isinstance(task, compat.Task):
        raise UserError(f"a workflow's task is a Django Task (made with @task), "
                        f"not {type(task).__name__}")
    backend = task.get_backend()
    if getattr(backend, "prefork_options", None) is None:
        raise UserError(f"task {task.module_path} is of TASKS[{task.backend!r}], a "
                        f"{type(backend).__name__}: a workflow's tasks use "
                        "prefork.contrib.django.TaskBackend")
    if task.run_after is not None:
        raise UserError(f"task {task.module_path} has a run_after: in a workflow, a step "
                        "starts when the workflow releases it")
    result, payload = backend.prepared(task, args, kwargs)
    spec = plain_job(task.module_path, payload, **backend.job_options(task))
    return TaskSpec(spec.new_job, result, backend.database)


def enqueue_workflow(flow: Flow, *, key: str | None = None,
                     using: str | None = None) -> EnqueuedTasks:
    """Enqueue a chain or a group of tasks (prefork.chain(), prefork.group() of job()s;
    prefork.job()s too) through Django's connection to their backends' database, inside
    the open transaction.atomic() (or one of its own): a rollback enqueues nothing, and
    task_enqueued is sent for each task once it commits. using: the Django database
    (default: the one of the tasks' backends). key: as prefork.enqueue_workflow()'s;
    a repeated key enqueues nothing and sends nothing: the results are then the
    workflow's as get_result() reads them."""
    from django.db import connections, transaction  # type: ignore[import-untyped, import-not-found, unused-ignore]
    listed = list(_jobs_of(flow))
    database = _database_of(listed, using)
    with transaction.atomic(using=database):
        raw = connections[database].connection   # atomic() has connected it
        made = enqueue_plain(raw, flow, key=key)
        pairs = list(zip(listed, made.job_ids))
        aliases = sorted({spec.result.backend for spec in listed if isinstance(spec, TaskSpec)})
        if key is not None and not _written_now(database, aliases, pairs):
            return EnqueuedTasks(made.id, made.job_ids,
                                 [_read(database, aliases, job_id) for job_id in made.job_ids])
        made_now = [_with_id(spec.result, job_id) if isinstance(spec, TaskSpec) else None
                    for spec, job_id in pairs]
        announce(database, raw, [spec.new_job.queue for spec in listed],
                 [result for result in made_now if result is not None])
    return EnqueuedTasks(made.id, made.job_ids, made_now)


def _written_now(database: str, aliases: list[str], pairs: list[tuple[JobSpec, int]]) -> bool:
    """Whether the jobs are this call's, not those of a workflow its key named: the
    first task's job holds this call's enqueued_at (job() stamps it to the microsecond)."""
    for spec, job_id in pairs:
        if isinstance(spec, TaskSpec):
            found = _read(database, aliases, job_id)
            return found is not None and found.enqueued_at == spec.result.enqueued_at
    return True   # no task: nothing to announce either way


def _read(database: str, aliases: list[str], job_id: int) -> Any:
    """The TaskResult of a job as get_result() reads it through the alias that enqueued
    it (None: no task of those aliases)."""
    for alias in aliases:
        try:
            return results.read(alias, database, str(job_id))
        except compat.TaskResultDoesNotExist:
            continue
    return None


def _jobs_of(step: Step) -> Iterator[JobSpec]:
    """The jobs of a workflow in the order it lists them: a chain's steps, a group's
    members, then its `then`."""
    if isinstance(step, JobSpec):
        yield step
    elif isinstance(step, Chain):
        for member in step.steps:
            yield from _jobs_of(member)
    elif isinstance(step, Group):
        for member in (*step.members, *([step.then] if step.then is not None else [])):
            yield from _jobs_of(member)
    else:
        raise UserError("a workflow is made with prefork.chain() or prefork.group()")


def _database_of(listed: list[JobSpec], using: str | None) -> str:
    """The one database the workflow's tasks go to."""
    from django.db import DEFAULT_DB_ALIAS  # type: ignore[import-untyped, import-not-found, unused-ignore]
    databases = {spec.database for spec in listed if isinstance(spec, TaskSpec)}
    if using is not None:
        databases.add(using)
    if len(databases) > 1:
        raise UserError(f"a workflow is enqueued on one database, and its tasks go to "
                        f"{', '.join(sorted(databases))}")
    return databases.pop() if databases else DEFAULT_DB_ALIAS


def _with_id(result: Any, job_id: int) -> Any:
    """A copy of a step's READY result with its job's id (the step may be enqueued again)."""
    return dataclasses.replace(result, id=str(job_id))
