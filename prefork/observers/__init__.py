"""What watches the supervisor besides its log: each observer gets the supervisor's
notable moments and a tick on every pass of its loop, with a narrow view of it
(SupervisorView), never the supervisor itself.

An observer (the Observer protocol) has three methods:
    notify(name, fields)   "started", "job_finished" (job_id, type, queue, outcome,
                           seconds), "worker_exited" (reason, status), "reloaded"
                           (config), "stopping" (mode), "stopped"
    tick(now, view)        periodic work on the main loop (never in a signal handler)
    next_deadline()        the monotonic time of its next tick's work (math.inf: none),
                           so that the loop wakes for it
"""
from typing import Any, Literal, Mapping, Optional, Protocol, Sequence, Union

from ..jobs import NewJob
from ..limits.rules import LimitUsage
from ..store.contract import QueueFigures
from .schedules import Scheduler
from .sdnotify import SystemdNotifier


class SupervisorView(Protocol):
    """What an observer may read of the supervisor, and the one thing it may ask:
    to enqueue a job (a schedule's tick) through the supervisor's connection."""

    @property
    def queues(self) -> Sequence[str]:
        """The queues the supervisor's children work on."""

    @property
    def title(self) -> Optional[str]:
        """The supervisor's process title: what it does, in one line."""

    @property
    def workers_alive(self) -> int:
        """Children working or ready to work (not stopping)."""

    @property
    def workers_target(self) -> int:
        """Children the supervisor keeps."""

    def running_jobs(self) -> list[tuple[str, str]]:
        """(queue, type) of each job the children run now."""

    def queue_stats(self, queues: Sequence[str]) -> Optional[dict[str, QueueFigures]]:
        """Depth and oldest ready age of these queues (Store.queue_stats); None when
        the database is away. A query: call it seldom."""

    def limit_usage(self) -> Optional[list[LimitUsage]]:
        """Each limited group with jobs running or waiting (Store.limit_usage); None
        when the database is away. A query: call it seldom."""

    def workflow_states(self) -> Optional[dict[str, int]]:
        """Outermost workflows running, dead or cancelled, by state (Store.workflow_states);
        None when the database is away. A query: call it seldom."""

    def enqueue(self, new_job: NewJob) -> Union[int, Literal[False]]:
        """Enqueue a job: its id, or False when the database is away."""


class Observer(Protocol):
    def notify(self, name: str, fields: Mapping[str, Any]) -> None:
        """One of the supervisor's notable moments (see the module's doc)."""

    def tick(self, now: float, view: SupervisorView) -> None:
        """Periodic work, on each pass of the main loop; now is monotonic."""

    def next_deadline(self) -> float:
        """The monotonic time the loop must wake for this observer (math.inf: never)."""


def build(config: Any) -> list[Observer]:
    """The observers this configuration asks for."""
    candidates: list[Optional[Observer]] = [
        SystemdNotifier.from_environment(), Scheduler.from_config(config)]
    if config.metrics_address:
        # prometheus_client only where metrics are served: without it every supervisor
        # (and each child it forks, a copy of it) is ~2.4 MiB smaller.
        from .metrics import Metrics
        candidates.insert(1, Metrics.from_config(config))
    return [observer for observer in candidates if observer is not None]
