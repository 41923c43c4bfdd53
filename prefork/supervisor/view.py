"""What the observers see of the supervisor: observers.SupervisorView, and no more."""
from typing import Any, Literal, Optional, Protocol, Sequence, Union

from ..jobs import NewJob
from ..limits.rules import LimitUsage
from ..store.contract import QueueFigures
from .pool import Pool
from .upkeep import Upkeep


class Observed(Protocol):
    """What the view reads of the supervisor (loop.Supervisor), whose values change as it
    runs (a reload, a signal, a new title): read at each call, never copied."""
    config: Any
    title: Optional[str]
    target: int
    pool: Pool
    upkeep: Upkeep


class ObservedSupervisor:
    """The supervisor as its observers see it (implements observers.SupervisorView)."""

    def __init__(self, supervisor: Observed) -> None:
        self._supervisor = supervisor

    @property
    def queues(self) -> Sequence[str]:
        return self._supervisor.config.queues

    @property
    def title(self) -> Optional[str]:
        return self._supervisor.title

    @property
    def workers_alive(self) -> int:
        return len(self._supervisor.pool.wanted())

    @property
    def workers_target(self) -> int:
        return self._supervisor.target

    def running_jobs(self) -> list[tuple[str, str]]:
        return [(child.job.queue, child.job.type)
                for child in self._supervisor.pool.children.values() if child.job]

    def queue_stats(self, queues: Sequence[str]) -> Optional[dict[str, QueueFigures]]:
        return self._supervisor.upkeep.queue_stats(queues)

    def limit_usage(self) -> Optional[list[LimitUsage]]:
        return self._supervisor.upkeep.read(lambda store: store.limit_usage())

    def workflow_states(self) -> Optional[dict[str, int]]:
        return self._supervisor.upkeep.read(lambda store: store.workflow_states())

    def enqueue(self, new_job: NewJob) -> Union[int, Literal[False]]:
        return self._supervisor.upkeep.enqueue(new_job)
