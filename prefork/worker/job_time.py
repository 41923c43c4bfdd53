"""How job time paces the worker's claims: the batch a claim asks for, and a
job's own time, from which the worker's running average is made.

A job's own time is the wall-clock time it took, less the time this thread was
ready to run but waited for a CPU (the kernel's run delay, in
/proc/thread-self/schedstat). On a saturated host (32 workers and the database
on 2 cores) a no-op job descheduled for 100 ms took 100 ms of wall-clock time
and almost none of its own: counted as slow, it made the worker give back its
whole held batch to siblings just as short of CPU, and shrink its next claims.
A job that sleeps, waits on I/O or computes keeps all of its time. Where the
kernel does not report the run delay (not Linux, or no sched_info), a job's
own time is its wall-clock time. Reading the run delay costs a pread() (~1.5 us)
as a job starts, and another as it ends when it took longer than UNREAD_WAIT.
"""
import os
import time
from typing import BinaryIO, Optional

from ..settings import MAX_CLAIM_BATCH

# Seconds of expected work a worker may hold in claimed, unstarted jobs. Fast
# jobs are claimed in batches (one commit for many claims); slow ones one at
# a time, so that a batch never makes siblings idle while its jobs wait.
HOLD_BUDGET = 0.05
JOB_TIME_WEIGHT = 0.3   # of the newest job in the running average of job time
SHORTEST_JOB_TIME = 1e-4   # seconds: bounds the batch a run of instant jobs asks for
SCHEDSTAT = "/proc/thread-self/schedstat"   # ns on a CPU, ns waiting for one, timeslices
# A job quicker than this sizes the largest batch whatever part of it was a wait
# for a CPU: its run delay is not read again.
UNREAD_WAIT = HOLD_BUDGET / MAX_CLAIM_BATCH


def batch_size(job_seconds: float, claim_batch: int, left: Optional[int] = None) -> int:
    """How many jobs to claim at once: as many as fit the hold budget at the recent
    job time, within claim_batch and what is left to run (None: no limit); at least one."""
    size = int(HOLD_BUDGET / max(job_seconds, SHORTEST_JOB_TIME))
    if left is not None:
        size = min(size, left)
    return max(1, min(claim_batch, size))


def running_average(average: Optional[float], seconds: float) -> float:
    """The running average of job time with a job of `seconds` folded in; the first
    job's time replaces the guess (None) rather than being averaged with it."""
    if average is None:
        return seconds
    return average + JOB_TIME_WEIGHT * (seconds - average)


class JobClock:
    """Times one job at a time, in the thread that runs them."""

    def __init__(self) -> None:
        self.schedstat: Optional[BinaryIO] = None
        self.opened = False              # opened on the first start(), by the job's thread
        self.waited_at_start: Optional[int] = None   # ns of run delay when the job started

    def start(self) -> float:
        """Note that a job starts now; returns the monotonic time, for own_seconds()."""
        self.waited_at_start = self._waited()
        return time.monotonic()

    def own_seconds(self, started: float) -> float:
        """The seconds since `started` (start()'s) less those spent waiting for a CPU."""
        elapsed = time.monotonic() - started
        waited_at_start, self.waited_at_start = self.waited_at_start, None
        if waited_at_start is None or elapsed < UNREAD_WAIT:
            return elapsed
        waited = self._waited()
        if waited is None:
            return elapsed
        # The run delay is read just outside the clock's window: it may exceed it a little.
        return max(0.0, elapsed - (waited - waited_at_start) / 1e9)

    def _waited(self) -> Optional[int]:
        """This thread's run delay so far in ns, or None where there is none to read."""
        if not self.opened:
            self.opened = True
            try:   # thread-self names the thread that opens it: the one that runs jobs
                self.schedstat = open(SCHEDSTAT, "rb", buffering=0)
            except OSError:
                return None
        if self.schedstat is None:
            return None
        fields = os.pread(self.schedstat.fileno(), 128, 0).split()
        return int(fields[1]) if len(fields) > 1 else None
