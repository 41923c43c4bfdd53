"""The supervisor as the one claimer of its pool (claimer = supervisor): it claims
for all its idle children in one transaction, hands each its jobs over its
wake-up pipe (protocol.encode_job), and writes the completions they report with
its next claim, in the same commit.

Each child is handed as much work as a worker would hold (job_time.batch_size at
the jobs' recent time), the one it runs included, within its max-items, and
handed more once it is down to half of that. A handed job is held for the child
from the claim on (children.ChildProcess.held): its lease is extended with the
others', and it goes back at once, uncharged, when the child dies; the child
releases those it will not run (a stop, a retirement, a slow job) and says which
(protocol.Returned). Only a look that found the queues empty makes us wait for a
wake-up (the doorbell, the wake-up port) or the next poll before claiming again.
"""
import time
from typing import Any, Iterable, Optional

from ..jobs import Job
from ..worker.job_time import HOLD_BUDGET, batch_size, running_average
from . import leases
from .children import ChildProcess, FinishedJob
from .protocol import encode_job
from .upkeep import HANDED, Upkeep

# A child's hand is filled again once it holds this share of a full hand or less:
# claims come in batches, not one job per job ended. Completions that no claim
# carries are written once the oldest has waited HOLD_BUDGET.
REFILL_AT = 0.5


class Handing:
    def __init__(self) -> None:
        self.queue_empty = False   # the last claim found fewer jobs than asked for
        # Running average of the jobs' time, as the parent sees them run (None: none yet).
        self.job_seconds: Optional[float] = None

    def look_again(self) -> None:
        """A wake-up or the poll: the next pass claims even if the last found nothing."""
        self.queue_empty = False

    def timed(self, finished: FinishedJob) -> None:
        self.job_seconds = running_average(self.job_seconds, finished.seconds)

    def hungry(self, children: Iterable[ChildProcess]) -> bool:
        """Does a child of ours wait with nothing to run?"""
        return any(_takes_jobs(child) and not child.in_hand for child in children)

    def hand_out(self, upkeep: Upkeep, children: Iterable[ChildProcess], config: Any,
                 claiming: bool) -> list[FinishedJob]:
        """Write the completions the children left us and, when claiming, claim what
        fills their hands, in one transaction; hand the jobs out. The jobs finished."""
        children = list(children)
        rooms = self.rooms(children, config) if claiming and not self.queue_empty else {}
        wanted = sum(rooms.values())
        owing = [child for child in children if child.handed and child.unsaved]
        write_at = next_write_at(owing)
        due = wanted or (write_at is not None and (write_at <= time.monotonic() or not claiming))
        if not due or upkeep.pulse.silent(config):
            return []   # silent, our children would not start what we hand
        finished, claimed = leases.write_and_claim(upkeep, owing, wanted, HANDED)
        if wanted and len(claimed) < wanted:
            self.queue_empty = True
        deal(claimed, rooms)
        return finished

    def rooms(self, children: Iterable[ChildProcess], config: Any) -> dict[ChildProcess, int]:
        """How many more jobs each child may be handed now."""
        hand = batch_size(HOLD_BUDGET if self.job_seconds is None else self.job_seconds,
                          config.claim_batch)
        rooms = {}
        for child in children:
            if not _takes_jobs(child) or child.in_hand > hand * REFILL_AT:
                continue
            room = hand - child.in_hand
            if child.max_items:
                room = min(room, child.max_items - child.jobs_started - len(child.held))
            if room > 0:
                rooms[child] = room
        return rooms


def next_write_at(children: Iterable[ChildProcess]) -> Optional[float]:
    """When the completions the children left us are due to be written without a
    claim (None: none waits): their jobs read done soon, as a batch's do."""
    waiting = [child.unsaved_since for child in children if child.handed and child.unsaved]
    return min(waiting) + HOLD_BUDGET if waiting else None


def _takes_jobs(child: ChildProcess) -> bool:
    return child.handed and child.ready and not child.stopping and not child.retire_reason


def deal(claimed: list[Job], rooms: dict[ChildProcess, int]) -> None:
    """Hand the jobs out one at a time around the children, the emptiest first, so
    that a short claim still reaches every idle child; then write them."""
    order = sorted(rooms, key=lambda child: child.in_hand)
    turns = [child for turn in range(max(rooms.values(), default=0))
             for child in order if rooms[child] > turn]
    for child, job in zip(turns, claimed):
        child.hand(encode_job(job), job.lease)
    for child in rooms:
        if child.outbox:
            child.flush()
