"""The part of the store contract (contract.py) that keeps the supervisor registry
(prefork_processes): a row per supervisor run, written by the supervisor (register,
publish, heartbeat, stop), pruned by the others when it falls silent, and read by
`status`, the dashboard and `enqueue` (what a row holds: registry_rows.py)."""
import abc
from collections.abc import Callable, Sequence
from typing import Any

from .registry_rows import Published
from .strays import HeldJob


def spare_none(held: HeldJob) -> bool:
    """prune_silent()'s default: every job of a silent supervisor goes back."""
    return False


class SupervisorRegistry(abc.ABC):
    @abc.abstractmethod
    def register_process(self, host: str, pid: int, queues: Sequence[str], workers: int,
                         version: str, published: Published | None = None) -> int:
        """Add a running supervisor to the registry, with the job types it handles and its
        heartbeat interval (None: neither, as an older release registers); its id."""

    @abc.abstractmethod
    def publish(self, process_id: int, published: Published) -> None:
        """Record in a running supervisor's row the job types and heartbeat interval in
        force after a reload (a pruned row is left alone: its supervisor's heartbeat
        learns it, and it registers again with them)."""

    @abc.abstractmethod
    def heartbeat(self, process_id: int, queues: Sequence[str], workers: int,
                  children_json: str) -> bool:
        """Record that the supervisor lives. False when others pruned it meanwhile."""

    @abc.abstractmethod
    def stop_process(self, process_id: int) -> None:
        """Mark a supervisor stopped after a clean exit."""

    @abc.abstractmethod
    def prune_silent(self, silent_seconds: float, limit: int = 10,
                     spare: Callable[[HeldJob], bool] = spare_none) -> list[tuple[int, int]]:
        """Mark supervisors silent for `silent_seconds` pruned and hand back the jobs
        their children held, but those spare() keeps (their holder still runs: they
        come back when it gives them back or when their lease expires);
        [(process id, jobs returned)] for those we pruned."""

    @abc.abstractmethod
    def running_processes(self) -> list[dict[str, Any]]:
        """The running supervisors, as status() lists them (its first part), without its
        counts: the dashboard takes those from queue_overview()."""

    @abc.abstractmethod
    def running_handlers(self) -> list[dict[str, Any]]:
        """Each running supervisor's queues and job types as published (registry_rows),
        its heartbeat_interval and heartbeat_age_s: what `enqueue` checks a type against."""
