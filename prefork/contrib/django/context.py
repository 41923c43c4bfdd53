"""The context a task that takes one (`@task(takes_context=True)`) is called with:
the framework's TaskContext, and in a workflow the jobs before it (upstream())."""
from dataclasses import dataclass, field
from typing import Any

from ...jobs import Job, Upstream
from . import compat


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskContext(compat.TaskContext):  # type: ignore[misc]
    """Django's TaskContext (task_result, attempt) of a task the queue runs."""
    _job: Job = field(repr=False, compare=False)

    def upstream(self) -> list[Upstream]:
        """In a workflow, the jobs whose end released this task, in the order they were
        enqueued, each with its id, how it ended and its result (the task's return
        value): a chain's previous step (each member of a group step), or a group's
        members for its `then`. Empty for a first step or a task of no workflow.

            [charged] = context.upstream()
            amount = charged.result["amount"]
        """
        return self._job.upstream()


def context_of(task_result: Any, job: Job) -> TaskContext:
    """The context of an attempt of a task."""
    return TaskContext(task_result=task_result, _job=job)
