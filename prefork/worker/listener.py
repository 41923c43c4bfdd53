"""What a worker reports as it goes (WorkerListener), and the listener of a worker
nobody watches."""
from typing import Protocol, Sequence

from ..jobs import Job, Lease, Outcome


class WorkerListener(Protocol):
    """What a worker reports as it goes, so that its owner can mirror it (the
    supervisor's child: its title and the pipe to the parent)."""

    def busy(self, job: Job) -> None:
        """About to run this job (reported first: the parent must know what we run)."""

    def held(self, leases: Sequence[Lease]) -> None:
        """Claimed in a batch and not started: the whole list, replacing the last one."""

    def waiting(self) -> None:
        """No job ready: about to sleep until woken (or to say so again)."""

    def idle(self, outcome: Outcome, seconds: float) -> None:
        """The job just run ended with this outcome, after this many seconds."""

    def saved(self, lost: Sequence[int]) -> None:
        """The unsaved completions were written; these job ids had lost their lease."""

    def returned(self, leases: Sequence[Lease]) -> None:
        """Jobs the parent handed, released unstarted: no longer held for us."""


class QuietListener:
    """The listener of a worker nobody watches (`prefork-queue work`)."""

    def busy(self, job: Job) -> None:
        pass

    def held(self, leases: Sequence[Lease]) -> None:
        pass

    def waiting(self) -> None:
        pass

    def idle(self, outcome: Outcome, seconds: float) -> None:
        pass

    def saved(self, lost: Sequence[int]) -> None:
        pass

    def returned(self, leases: Sequence[Lease]) -> None:
        pass
