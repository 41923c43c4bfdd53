"""A supervised child's side of cancelling a running job: which of its jobs the
parent says are cancelled, and JobCancelled raised in the handler that runs one.

The parent writes each cancelled job's id, one line each, into the child's
control pipe, then sends SIGUSR2 (supervisor/cancels.py). The child's handler of
that signal reads the pipe (CancelInbox.receive) and interrupts the handler only
when an id is the job it runs now: an id that arrives late, once that job ended
and the next began, must never stop the wrong job. Ids of jobs claimed in the
batch and not started are kept: such a job is not run when its turn comes, it
ends cancelled at once.

The encoder of the pipe's lines is here with its decoder, so the two sides cannot
drift apart.
"""
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any, Optional

from ..errors import JobCancelled
from ..events import Event
from ..jobs import Job, Outcome
from ..logs import event

CANCEL_SIGNAL = signal.SIGUSR2
READ_SIZE = 4096
KEPT_UNKNOWN = 1024   # ids a child handed its jobs keeps for jobs it has not seen


def cancel_line(job_id: int) -> bytes:
    """One cancelled job's id as the parent writes it into the control pipe."""
    return b"%d\n" % job_id


def read_ids(fd: int) -> list[int]:
    """The ids waiting in the (non-blocking) control pipe. The parent writes each
    line in one write of a few bytes, which a pipe never splits."""
    data = b""
    try:
        while chunk := os.read(fd, READ_SIZE):
            data += chunk
    except BlockingIOError:
        pass
    return [int(line) for line in data.split() if line.isdigit()]


def stop_soft_timer() -> None:
    """Disarm the soft timeout's alarm: once a job is cancelled, a JobTimeout must not
    replace JobCancelled while the handler's finally blocks run (the worker arms that
    timer for handlers alone, so nothing else is lost)."""
    signal.setitimer(signal.ITIMER_REAL, 0)


class CancelInbox:
    """What the parent said about this child's jobs. Without a control pipe (a worker
    nobody supervises: `prefork-queue work`) nothing is ever cancelled here."""

    def __init__(self, fd: Optional[int] = None, handed: bool = False) -> None:
        self.fd = fd
        self.current: Optional[int] = None   # the job being run (from just before busy())
        self.current_cancelled = False
        self.held_cancelled: set[int] = set()   # claimed in the batch, not started
        # Handed its jobs by the parent: a cancelled one may still be in the pipe, not
        # held yet, so every id is kept (the last KEPT_UNKNOWN of them).
        self.handed = handed

    def start(self, job: Job, held: Iterable[Job]) -> None:
        """`job` is about to run (called before the parent hears of it, so that no id
        the parent sends for it can come before this). Ids kept for jobs no longer
        held (given back) are forgotten."""
        self.current = job.id
        self.current_cancelled = job.id in self.held_cancelled
        if self.handed:
            self.held_cancelled.discard(job.id)
            if len(self.held_cancelled) > KEPT_UNKNOWN:   # news of jobs long over
                self.held_cancelled = set(sorted(self.held_cancelled)[-KEPT_UNKNOWN:])
        else:
            self.held_cancelled &= {other.id for other in held}

    def receive(self, held: Iterable[Job]) -> bool:
        """Read what the parent sent (in the signal's handler): True when the job
        running now was cancelled by it. Ids of jobs we neither run nor hold are
        late news of jobs over: ignored."""
        if self.fd is None:
            return False
        held_ids = {job.id for job in held}
        hit = False
        for job_id in read_ids(self.fd):
            if job_id == self.current:
                hit = not self.current_cancelled
                self.current_cancelled = True
            elif job_id in held_ids or self.handed:
                self.held_cancelled.add(job_id)
        return hit

    def check(self) -> None:
        """Just before the handler runs: a job cancelled meanwhile (or while it was
        held) does not start."""
        if self.current_cancelled:
            stop_soft_timer()
            raise JobCancelled()


def signal_handler(inbox: CancelInbox, held: Callable[[], Iterable[Job]],
                   running_handler: Callable[[], bool]) -> Callable[[int, Any], None]:
    """The child's SIGUSR2 handler: read the control pipe, and raise JobCancelled in
    the running handler when its job is among the ids (a handler about to start
    raises it itself: CancelInbox.check)."""
    def on_signal(signum: int, frame: Any) -> None:
        if inbox.receive(held()) and running_handler():
            stop_soft_timer()
            raise JobCancelled()
    return on_signal


def record_cancelled(store: Any, job: Job) -> Outcome:
    """The handler ended on JobCancelled: the job ends cancelled, not retried. One that
    had already committed its completion (job.transaction()) stays done."""
    if job.finished:
        return Outcome.DONE
    if not store.finish_cancelled(job.lease):
        event(Event.JOB_LEASE_LOST, job_id=job.id, type=job.type)
        return Outcome.LOST
    event(Event.JOB_CANCELLED, job_id=job.id, type=job.type,
          queue=job.queue, attempt=job.attempt)
    return Outcome.CANCELLED
