"""The supervisor's decisions, as functions of plain values: which child goes
first, whose restart a request asks for, how long to back off, what is due.

Nothing here forks, reads a pipe or queries: the pool and the loop gather the
facts and act on the answer; tests/fast/test_supervisor_decisions.py checks
the rules alone.
"""
import math
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar

FIRST_RESTART_BACKOFF = 0.5    # seconds after the first failed start; doubles after each
WRITE_BEHIND_AFTER = 1.0       # seconds a child's done job may wait for its batch's write
# Causes of a stop that replace the child, one at a time: the child is stopped
# first and its replacement started at once (a reload or restart may change what a
# child is, so the two do not overlap longer than the old one's drain).
ROLLING_CAUSES = ("reload", "restart")
# Causes of a recycling. A child that starts its last job (max-items) gets its
# successor forked and connected while it runs it, and goes once both are done;
# successors and rolling replacements together stay within spares(). A child
# that asks to go with no successor (max-memory, or no spare left) holds nothing
# and would only idle: it is stopped at once and replaced once it has exited.
# So a pool recycling after every job (--max-items 1) recycles in parallel,
# never beyond workers + spares processes.
RECYCLE_CAUSES = ("max-items", "max-memory")
SPARE_SHARE = 4   # at most one process beyond the pool's size per this many workers
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
    @property
    def successor(self) -> Optional[int]: ...      # pid of the child forked to replace it
    @property
    def last_job(self) -> bool: ...                # has it started its max-items'th job?


Child = TypeVar("Child", bound=ChildFacts)


def retire_order(child: ChildFacts) -> tuple[bool, float]:
    """Idle before busy, then oldest first."""
    return (child.busy, child.started)


def extras(wanted: Sequence[Child], target: int) -> list[Child]:
    """The children to stop when more are wanted than the target (in retire order),
    among those not stopping yet."""
    going = [child for child in wanted if child.stop_cause is None]
    return sorted(going, key=retire_order)[:max(0, len(wanted) - target)]


def spares(workers: int) -> int:
    """How many processes beyond `workers` recycling and replacements may add: one per
    SPARE_SHARE workers, at least one. Bounded by the pool's size, so recycling never
    stampedes (at most a quarter of the pool forks and connects at once) and a pool
    of 3 replaces one child at a time, as before."""
    return max(1, math.ceil(workers / SPARE_SHARE))


def overlapping(children: Sequence[ChildFacts]) -> int:
    """The processes beyond the wanted ones that replacements account for: children
    whose successor is forked (until they are reaped), and children stopped for a
    rolling replacement (theirs started at once)."""
    return sum(1 for child in children
               if child.successor is not None or child.stop_cause in ROLLING_CAUSES)


def retired(child: ChildFacts) -> bool:
    """Has the child asked to be recycled (max-items, max-memory), not yet stopped?"""
    return child.stop_cause is None and child.retire_reason in RECYCLE_CAUSES


def recycling(child: ChildFacts) -> bool:
    """Is the child to be recycled: asked to, or running its last job?"""
    return retired(child) or (child.stop_cause is None and child.last_job)


def successors_due(children: Sequence[Child], spare_count: int) -> list[Child]:
    """The recycling children to fork a successor for now, in retire order (those
    that asked first, then the oldest on its last job): as many as the spares left
    over by the replacements under way allow."""
    room = spare_count - overlapping(children)
    waiting = [child for child in children if recycling(child) and child.successor is None]
    return sorted(waiting, key=retire_order)[:max(0, room)]


def next_replacement(children: Sequence[Child], generation: int,
                     spare_count: int) -> Optional[Child]:
    """The child to replace now (reload, restart), if any: none while another is
    being replaced or no spare is left; else the first in retire order among the
    wanted ones that asked to retire or belong to an older generation. (A child
    that asks to be recycled gets a successor instead: successors_due.)"""
    if any(child.stop_cause in ROLLING_CAUSES for child in children) \
            or overlapping(children) >= spare_count:
        return None
    candidates = [child for child in children
                  if child.stop_cause is None and child.successor is None
                  and not recycling(child)
                  and (child.retire_reason or child.generation != generation)]
    return min(candidates, key=retire_order) if candidates else None


def predecessors_to_stop(children: Sequence[Child], ready: Callable[[int], Optional[bool]]
                         ) -> list[Child]:
    """The children that asked to be recycled whose successor is up: ready(pid) is
    True once that child said it is ready (None: it is gone)."""
    return [child for child in children if retired(child) and child.successor is not None
            and ready(child.successor)]


def stops_due(children: Sequence[Child], successors: Sequence[Child]) -> list[Child]:
    """The children that asked to be recycled and get no successor (none forked,
    none about to be): stopped at once, replaced once they have exited."""
    return [child for child in children if retired(child) and child.successor is None
            and child not in successors]


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


def hand_jobs_at_fork(config: Any, limits_declared: bool) -> bool:
    """Does the parent claim the job of each child it forks, and hand it over at the
    fork? Only for a child forked per job (max-items 1, no jitter): there a child's
    own connection and claim cost more than its job. Not with limits declared:
    limited jobs wait outside the plain claim, for children that claim themselves."""
    return config.max_items == 1 and not config.max_items_jitter and not limits_declared


def supervisor_claims(config: Any, limits_declared: bool) -> bool:
    """Does the parent claim for all its long-lived children and hand each its jobs
    (claimer = supervisor)? Not with limits declared: limited jobs wait outside the
    plain claim, for children that claim themselves. Not for children forked per
    job: the parent hands them their job at the fork (hand_jobs_at_fork)."""
    return config.claimer == "supervisor" and not limits_declared \
        and not hand_jobs_at_fork(config, limits_declared)
