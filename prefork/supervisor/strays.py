"""After a reconnection, the jobs the server reached holds in our name that none of
our workers holds. A failover to a replica brings them: their end (a completion, a
hand-back) committed on the old primary and never reached the replica, so they read
reserved by us under a lease of the old primary's. They go back at once
(store.hand_back_strays), instead of each waiting out its lease; so do those
reserved under the id we had before we joined the registry again (a server that
lacks our row).

A worker of ours that claimed a job a moment ago may not have told us yet: a young
claim by one of our own processes is left to a later check. So the check runs at
the reconnection and at the next heartbeats, STRAY_CHECKS times in all.
"""
from typing import Callable, Collection, Sequence

from ..logs import current_host_pid
from ..store.contract import HeldJob
from .children import ChildProcess

STRAY_CHECKS = 3


class StrayChecks:
    """When the next checks are due, and under which registry ids."""

    def __init__(self) -> None:
        self.left = 0
        self.next_at = 0.0   # monotonic
        self.former_ids: set[int] = set()   # ours before we joined the registry again

    def reconnected(self) -> None:
        self.left, self.next_at = STRAY_CHECKS, 0.0

    def rejoined(self, former_id: int) -> None:
        self.former_ids.add(former_id)
        self.reconnected()

    def due(self, now: float, interval: float) -> bool:
        """Is a check due now? Counted as done (the next one `interval` later)."""
        if not self.left or now < self.next_at:
            return False
        self.left, self.next_at = self.left - 1, now + interval
        return True

    def ids(self, process_id: int) -> list[int]:
        """The registry ids to check; the former ones for the last time once no check
        is left."""
        checked = [process_id, *sorted(self.former_ids - {process_id})]
        if not self.left:
            self.former_ids.clear()
        return checked


def spare(children: Sequence[ChildProcess], pending: Collection[int],
          young_seconds: float) -> Callable[[HeldJob], bool]:
    """What hand_back_strays must keep: the jobs our children hold (running, held in a
    batch, done but not yet written), those whose hand-back is pending (it goes with
    its own charge), and claims younger than young_seconds by one of our processes."""
    held = set(pending)
    ours = {current_host_pid()}
    host = current_host_pid().rpartition(":")[0]
    for child in children:
        ours.add(f"{host}:{child.pid}")
        held.update(lease.job_id for lease in child.held)
        held.update(child.unsaved)
        if child.job is not None:
            held.add(child.job.lease.job_id)
    return lambda job: job.job_id in held or (job.worker in ours
                                              and job.seconds_since_write < young_seconds)
