"""The parent's side of cancelling running jobs (`prefork-queue cancel`, prefork.cancel()).

While any child runs or holds a job, the parent asks the store, once per poll
interval, which of its jobs have a cancellation pending (one indexed read that
finds nothing when none is; never asked while every child is idle, and simply
asked again later while the database is away). A child that runs or holds such
a job is told which: the id written into its control pipe, then SIGUSR2
(worker/cancellation.py raises JobCancelled in the handler of that job only, and
does not start a held one). A running job's handler then has cancel_grace
seconds to return: the child gets a stop deadline (children.Deadline, which the
pool enforces) that is lifted once the job ends. Killed past it, the child's job
ends cancelled here instead of being handed back, and the pool replaces the child.

Each job is told once per claim: its lease (id and claim token) is remembered,
so a job retried and claimed again may be cancelled again.
"""
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from ..events import Event
from ..jobs import Lease, Outcome
from ..logs import event
from ..worker.cancellation import CANCEL_SIGNAL, cancel_line
from .children import ChildProcess, Deadline, FinishedJob
from .upkeep import Upkeep

KILL_REASON = "cancelled"   # the reason of the stop deadline, and of the kill


@dataclass(frozen=True)
class Stopping:
    """A running job told it is cancelled, and its child's stop deadline for it."""
    lease: Lease
    deadline: Deadline
    replaced: Optional[Deadline]   # a later one (a drain's), back in force once the job ends


def _leases_of(child: ChildProcess) -> list[Lease]:
    """The jobs a child runs or holds."""
    return list(child.held) + ([child.job.lease] if child.job else [])


class Cancels:
    def __init__(self) -> None:
        self.next_look_at = 0.0
        self.told: dict[int, set[Lease]] = {}       # by child pid: the cancels sent it
        self.stopping: dict[int, Stopping] = {}     # by child pid: its running job's cancel

    def tick(self, upkeep: Upkeep, children: dict[int, ChildProcess], config: Any,
             now: float) -> None:
        """Lift the deadlines of cancelled jobs that ended, then tell children of new
        cancels when a look is due. Runs before the pool enforces its deadlines: no
        child may be killed for a job it no longer runs."""
        for pid, stopping in list(self.stopping.items()):
            child = children.get(pid)
            if child is None or child.job is None or child.job.lease != stopping.lease:
                del self.stopping[pid]
                if child is not None and child.deadline is stopping.deadline:
                    child.deadline = stopping.replaced
            elif child.deadline is not stopping.deadline:   # a drain set its own since
                self._set_deadline(child, stopping.lease, stopping.deadline.at)
        if now < self.next_look_at:
            return
        busy = [child for child in children.values() if _leases_of(child)]
        if not busy:
            return   # nothing of ours can be cancelled: no query
        self.next_look_at = now + config.poll_interval
        requested = upkeep.cancel_requested()
        if requested:   # else none is pending, or the database is away
            for child in busy:
                self._tell(child, requested, now + config.cancel_grace)

    def _tell(self, child: ChildProcess, requested: set[int], kill_at: float) -> None:
        """Send the child the ids of its cancelled jobs it was not told of yet."""
        leases = _leases_of(child)
        told = self.told.setdefault(child.pid, set())
        told.intersection_update(leases)   # forget the jobs it no longer has
        news = [lease for lease in leases if lease.job_id in requested and lease not in told]
        if not news or not _write(child, news):
            return
        told.update(news)
        child.send(CANCEL_SIGNAL)
        for lease in news:
            event(Event.JOB_CANCEL_SENT, job_id=lease.job_id, pid=child.pid,
                  running=child.job is not None and child.job.lease == lease)
        if child.job is not None and child.job.lease in news:
            self._set_deadline(child, child.job.lease, kill_at)

    def _set_deadline(self, child: ChildProcess, lease: Lease, kill_at: float) -> None:
        """The cancel's deadline, unless an earlier one (a quick stop's) is set."""
        if child.deadline is not None and child.deadline.at <= kill_at:
            return
        deadline = Deadline(kill_at, KILL_REASON, False)
        self.stopping[child.pid] = Stopping(lease, deadline, child.deadline)
        child.deadline = deadline

    def child_exited(self, upkeep: Upkeep, child: ChildProcess) -> list[FinishedJob]:
        """Before the hand-back of a dead child's jobs: the job it was killed for past
        the grace ends cancelled, not handed back. With the database away it is left to
        the hand-back, which the store ends cancelled as well (the request is on its row)."""
        self.told.pop(child.pid, None)
        stopping = self.stopping.pop(child.pid, None)
        job = child.job
        if stopping is None or child.kill_reason != KILL_REASON or job is None \
                or job.lease != stopping.lease:
            return []
        event(Event.JOB_CANCEL_KILLED, job_id=job.lease.job_id, type=job.type, queue=job.queue,
              pid=child.pid, seconds=round(time.monotonic() - job.since, 1))
        cancelled = upkeep.finish_cancelled(job.lease)
        if cancelled is None:
            return []
        child.job = None
        if not cancelled:
            event(Event.JOB_LEASE_LOST, job_id=job.lease.job_id, type=job.type)
        outcome = Outcome.CANCELLED if cancelled else Outcome.LOST
        return [FinishedJob(job, outcome, time.monotonic())]


def _write(child: ChildProcess, leases: Iterable[Lease]) -> bool:
    """Write the ids into the child's control pipe; False when it cannot take them
    (gone: the reaper will see it; or full: told again at the next look)."""
    try:
        os.write(child.control_fd, b"".join(cancel_line(lease.job_id) for lease in leases))
        return True
    except OSError:
        return False
