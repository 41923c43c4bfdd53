"""The heartbeat's two guards: what it writes of the pool stays bounded, and a
supervisor whose heartbeats keep failing stops taking jobs before others may
prune it.

A failing heartbeat is the one thing that makes a live supervisor look dead: once
it has been silent for supervisor_timeout, any other supervisor prunes it and hands
out again the jobs its workers run. So after hold_after() without a heartbeat, the
supervisor holds: its workers finish the jobs they run, as in a graceful stop, and
none takes another, until a heartbeat succeeds again.
"""
import json
import logging
from typing import Any, Iterable, Protocol

from ..logs import event
from .children import ChildProcess

# The most bytes of the children's description a heartbeat writes: every child of a
# pool of about a thousand busy workers on 128-character job types (3,000 idle ones),
# well under the column (MEDIUMTEXT, 16 MiB) and any server's max_allowed_packet.
MAX_CHILDREN_BYTES = 256 * 1024
# Room kept for the entry that counts the children left out.
SUMMARY_ROOM = 128
HOLD_CAUSE = "heartbeat failing"   # why the children of a holding supervisor stop
RETRY_AFTER_FAILURE = 1.0   # seconds: a failed heartbeat is tried again this soon


def children_text(described: str, limit: int = MAX_CHILDREN_BYTES) -> str:
    """The pool's description (Pool.describe: a JSON list, ASCII) as the registry gets
    it, at most `limit` bytes: the children that do not fit are left out, counted by a
    last entry shaped like a child's, whose state says how many (what `status` and the
    dashboard print of it)."""
    if len(described) <= limit:
        return described
    children: list[dict[str, Any]] = json.loads(described)
    listed: list[str] = []
    size = 2 + SUMMARY_ROOM   # the brackets and the summary entry
    for child in children:
        text = json.dumps(child)
        if size + len(text) + 2 > limit:
            break
        listed.append(text)
        size += len(text) + 2
    left_out = len(children) - len(listed)
    summary = {"pid": 0, "slot": 0, "state": f"{left_out} more workers not listed",
               "job_id": None, "type": None, "seconds": None}
    return "[" + ", ".join(listed + [json.dumps(summary)]) + "]"


class PoolOps(Protocol):
    """What the watch does with the pool (supervisor.pool.Pool)."""

    children: dict[int, ChildProcess]

    def wanted(self) -> list[ChildProcess]: ...
    def stop(self, child: ChildProcess, cause: str) -> None: ...
    def manage(self, target: int, process_id: int) -> None: ...


def hold_after(config: Any) -> float:
    """Seconds without a successful heartbeat after which the supervisor holds: two
    heartbeats missed, or a third of the supervisor timeout when that is sooner."""
    return min(2 * config.heartbeat_interval, config.supervisor_timeout / 3)


class HeartbeatWatch:
    """Whether the heartbeats succeed, and whether the supervisor holds for it."""

    def __init__(self, now: float) -> None:
        self.last_success = now   # monotonic: registering counts as one
        self.holding = False

    def keep(self, pool: PoolOps, target: int, process_id: int) -> None:
        """Keep the pool (Pool.manage) at pool_size(); while holding, stop each child
        (Pool.stop), to finish the job it runs, as in a graceful stop, and exit."""
        if not self.holding:
            pool.manage(self.pool_size(target, pool.children.values()), process_id)
            return
        for child in pool.wanted():
            if child.stop_cause is None:
                pool.stop(child, HOLD_CAUSE)

    def pool_size(self, target: int, children: Iterable[ChildProcess]) -> int:
        """The children to keep: none while holding; after it, the target less those
        still finishing the job they ran when the hold began (never more at once)."""
        if self.holding:
            return 0
        return max(0, target - sum(child.stop_cause == HOLD_CAUSE for child in children))

    def record(self, now: float, succeeded: bool, config: Any, error: str) -> float:
        """Record a heartbeat's outcome (`error`: why it failed); the seconds until the
        next, sooner after a failure: a hold must begin, and end, without delay."""
        if succeeded:
            self.succeeded(now)
            return float(config.heartbeat_interval)
        self.failed(now, config, error)
        return min(config.heartbeat_interval, RETRY_AFTER_FAILURE)

    def succeeded(self, now: float) -> None:
        self.last_success = now
        if self.holding:
            self.holding = False
            event("heartbeat_restored", level=logging.WARNING)

    def failed(self, now: float, config: Any, error: str) -> None:
        """A heartbeat failed (`error` says why): hold once they have failed for
        hold_after(); said once, when the hold begins."""
        silent = now - self.last_success
        if self.holding or silent < hold_after(config):
            return
        self.holding = True
        event("heartbeat_failing", level=logging.ERROR, error=error,
              seconds_since_heartbeat=round(silent, 1),
              supervisor_timeout=config.supervisor_timeout)
