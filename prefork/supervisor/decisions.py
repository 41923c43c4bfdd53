"""The supervisor's decisions, as functions of plain values: which child goes
first, whose restart a request asks for, how long to back off, what is due.

Nothing here forks, reads a pipe or queries: the pool and the loop gather the
facts and act on the answer; tests/fast/test_supervisor_decisions.py checks
the rules alone.
"""
from datetime import datetime, timezone
from typing import Callable, Optional, Protocol, Sequence, TypeVar

FIRST_RESTART_BACKOFF = 0.5    # seconds after the first failed start; doubles after each
WRITE_BEHIND_AFTER = 1.0       # seconds a child's done job may wait for its batch's write
# Causes of a stop that replace the child, one at a time, so that the pool never
# surges past workers + 1 processes nor recycles all at once.
ROLLING_CAUSES = ("reload", "restart", "max-items", "max-memory")
# Seconds by which a process may seem to start after the claim it made: its start
# time is read in clock ticks, the claim's time on the database's clock.
START_TIME_SLACK = 1.0


class ChildFacts(Protocol):
    """What the decisions read of a child (supervisor.children.ChildProcess)."""

    @property
    def busy(self) -> bool: ...
    @property
    def started(self) -> float: ...              # monotonic
    @property
    def started_wall(self) -> float: ...         # Unix time, compared with restart requests
    @property
    def generation(self) -> int: ...
    @property
    def retire_reason(self) -> Optional[str]: ...  # the child (or a restart) asks to go
    @property
    def stop_cause(self) -> Optional[str]: ...     # why we told it to stop; None: wanted


Child = TypeVar("Child", bound=ChildFacts)


def retire_order(child: ChildFacts) -> tuple[bool, float]:
    """Idle before busy, then oldest first."""
    return (child.busy, child.started)


def extras(wanted: Sequence[Child], target: int) -> list[Child]:
    """The children to stop when more are wanted than the target (in retire order)."""
    return sorted(wanted, key=retire_order)[:max(0, len(wanted) - target)]


def next_replacement(children: Sequence[Child], generation: int) -> Optional[Child]:
    """The child to replace now (reload, restart, recycling), if any: none while
    another is being replaced; else the first in retire order among the wanted
    ones that asked to retire or belong to an older generation."""
    if any(child.stop_cause in ROLLING_CAUSES for child in children):
        return None
    candidates = [child for child in children if child.stop_cause is None
                  and (child.retire_reason or child.generation != generation)]
    return min(candidates, key=retire_order) if candidates else None


def restart_request_applies(requested_at: Optional[datetime], database_now: datetime,
                            applied: Optional[datetime]) -> bool:
    """A restart request is acted on once, and not before its time (by the database's clock)."""
    return requested_at is not None and requested_at <= database_now and requested_at != applied


def started_before(started_wall: float, requested_at: datetime, database_now: datetime,
                   local_now: datetime) -> bool:
    """Did a child start before the request? Its start is read on the database's
    clock (our clock's offset from it applied), as the request's time is.
    Datetimes are naive UTC, as the stores return them."""
    offset = database_now - local_now
    started = datetime.fromtimestamp(started_wall, timezone.utc).replace(tzinfo=None)
    return started + offset < requested_at


def to_restart(children: Sequence[Child], requested_at: datetime, database_now: datetime,
               local_now: datetime) -> list[Child]:
    """The wanted children a restart request retires: started before it, not retiring yet."""
    return [child for child in children if child.stop_cause is None
            and not child.retire_reason
            and started_before(child.started_wall, requested_at, database_now, local_now)]


def restart_backoff(failures: int, cap: float) -> float:
    """Seconds to wait before the next start after `failures` failed ones in a row."""
    return min(cap, FIRST_RESTART_BACKOFF * 2.0 ** (failures - 1))


def hard_timeout_due(since: float, now: float, hard_timeout: Optional[float]) -> bool:
    """Has a job running since `since` outlived its hard timeout (0 or None: none)?"""
    return bool(hard_timeout and now - since > hard_timeout)


def write_behind_due(unsaved_since: float, now: float) -> bool:
    """Has a child's done job waited long enough for its batch's write that we write it?"""
    return unsaved_since <= now - WRITE_BEHIND_AFTER


def lease_extension_due(since: float, now: float, lease_seconds: float) -> bool:
    """Only a job older than a third of the lease needs its lease extended: a fast
    job has finished (and its token is void) by the time we would ask."""
    return since <= now - lease_seconds / 3


def holder_may_run(worker: str, seconds_since_claim: float, host: str,
                   started_at: Callable[[int], Optional[float]], now: float) -> bool:
    """May the worker (host:pid) that claimed a job of a silent supervisor still run
    it? Only on our own host can we tell: while a process of that pid lives that
    started before the claim (one started after it merely reuses the pid).
    started_at(pid): a live process's start (Unix time), None when there is none.
    Elsewhere, no: the silent supervisor's host is taken for gone."""
    holder_host, _, pid = worker.rpartition(":")
    if holder_host != host or not (pid.isascii() and pid.isdigit()):
        return False
    started = started_at(int(pid))
    return started is not None and started <= now - seconds_since_claim + START_TIME_SLACK
