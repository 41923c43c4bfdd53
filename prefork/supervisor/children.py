"""The parent's record of each child: its pipes, what it holds, why it may be stopping."""
import dataclasses
import os
import signal
import time
from dataclasses import dataclass
from typing import Optional

from ..jobs import Lease, Outcome
from . import protocol


@dataclass(frozen=True)
class RunningJob:
    """The job a child said it runs."""
    lease: Lease
    type: str
    queue: str
    since: float   # monotonic: when the child said it started it


@dataclass(frozen=True)
class FinishedJob:
    """A job a child ran to an outcome (unsaved: done, its completion not written yet)."""
    job: RunningJob
    outcome: Outcome
    ended: float   # monotonic
    ran: Optional[float] = None   # seconds, as its child timed them (None: as we saw it)

    @property
    def seconds(self) -> float:
        return self.ended - self.job.since if self.ran is None else self.ran

    def saved(self, completed: bool) -> "FinishedJob":
        """This unsaved job once its completion is written: done, or lost."""
        return dataclasses.replace(self, outcome=Outcome.DONE if completed else Outcome.LOST)


@dataclass(frozen=True)
class Deadline:
    """When we SIGKILL a child that has not exited by then, and what that means for its job."""
    at: float        # monotonic
    reason: str
    charge: bool     # does the kill count against the job it holds?


class ChildProcess:
    def __init__(self, pid: int, slot: int, generation: int, read_fd: int, wake_fd: int,
                 control_fd: int, max_items: int = 0) -> None:
        self.pid, self.slot, self.generation = pid, slot, generation
        self.max_items = max_items   # it retires after that many jobs (0: never)
        self.jobs_started = 0
        self.read_fd, self.wake_fd = read_fd, wake_fd
        self.control_fd = control_fd   # parent -> child: ids of its cancelled jobs (cancels.py)
        self.reader = protocol.LineReader(read_fd, protocol.decode)
        self.started = time.monotonic()
        self.started_wall = time.time()   # compared with restart requests
        self.ready = False
        self.waiting = False        # idle, with no job ready when it last looked
        self.job: Optional[RunningJob] = None
        self.held: tuple[Lease, ...] = ()   # claimed in a batch, not started
        # Run to success, completion not yet written by the child.
        self.unsaved: dict[int, FinishedJob] = {}
        self.retire_reason: Optional[str] = None  # asks to be recycled (max-items, max-memory)
        self.stop_cause: Optional[str] = None     # why we told it to stop; None while wanted
        # The child forked to take over from this one, which goes once that is ready.
        self.successor: Optional[int] = None
        self.checked_schema_of: Optional[str] = None   # the DSN it checks the schema of, if any
        self.kill_reason: Optional[str] = None    # why we killed it, if we did
        # Does its death count against the job it runs? Always (a crash, an exit:
        # every death costs that job a crash), unless we killed it ourselves to stop
        # it (quick stop, graceful timeout, cancel: pool.kill()) or it told us the
        # database failed it (DatabaseFailed).
        self.charge_job = True
        self.deadline: Optional[Deadline] = None
        # Forked with a job we claimed, or handed its jobs: we write a job's completion
        # should it simply succeed.
        self.parent_completes = False
        # We claim its jobs and hand them over its wake-up pipe (claimer = supervisor);
        # the bytes of them that the pipe did not take yet wait in its outbox.
        self.handed = False
        self.outbox = b""

    @property
    def stopping(self) -> bool:
        return self.stop_cause is not None

    @property
    def in_hand(self) -> int:
        """The jobs it runs or holds."""
        return len(self.held) + (self.job is not None)

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def last_job(self) -> bool:
        """Has it started the last job its max-items lets it run?"""
        return bool(self.max_items) and self.jobs_started >= self.max_items

    @property
    def unsaved_since(self) -> float:
        """When the oldest unsaved job ended (there must be one)."""
        return min(finished.ended for finished in self.unsaved.values())

    def read_messages(self) -> list[protocol.Message]:
        return self.reader.read()

    def apply(self, message: protocol.Message) -> list[FinishedJob]:
        """Update what we know from one message; returns the jobs it tells us are
        finished, often none."""
        match message:
            case protocol.Ready():
                self.ready = True
            case protocol.Held(leases):
                self.held = leases
            case protocol.Busy(lease, job_type, queue):
                self.held = tuple(held for held in self.held if held.job_id != lease.job_id)
                self.waiting = False
                self.jobs_started += 1
                self.job = RunningJob(lease, job_type, queue, time.monotonic())
            case protocol.Waiting():
                self.waiting = True
            case protocol.Idle(outcome, seconds):
                return self._job_ended(outcome, seconds)
            case protocol.Saved(lost):
                saved = [finished.saved(job_id not in lost)
                         for job_id, finished in self.unsaved.items()]
                self.unsaved = {}
                return saved
            case protocol.Retire(reason):
                self.retire_reason = reason
            case protocol.Returned(leases):
                # By lease, not id: a job released and claimed again keeps its id, and
                # we may have handed it anew before reading this message.
                released = set(leases)
                self.held = tuple(held for held in self.held if held not in released)
            case protocol.DatabaseFailed():
                self.charge_job = False
        return []

    def _job_ended(self, outcome: Outcome, seconds: float) -> list[FinishedJob]:
        running, self.job = self.job, None
        if running is None:   # a job given back before it started
            return []
        finished = FinishedJob(running, outcome, time.monotonic(), seconds)
        if outcome is Outcome.UNSAVED:   # its outcome comes with the Saved message
            self.unsaved[running.lease.job_id] = finished
            return []
        return [finished]

    def hand(self, line: bytes, lease: Lease) -> None:
        """Hand the child a job we claimed (protocol.encode_job's line): it holds it
        from now on, for us; flush() writes it."""
        self.held += (lease,)
        self.outbox += line

    def flush(self) -> None:
        """Write what the outbox holds, as much as the pipe takes now."""
        try:
            written = os.write(self.wake_fd, self.outbox)
        except BlockingIOError:
            return
        except OSError:   # gone: reaped soon, and what it held is given back then
            written = len(self.outbox)
        self.outbox = self.outbox[written:]

    def wake(self) -> None:
        """Tell a waiting child that work is ready."""
        if self.handed:
            return   # its pipe carries jobs, and we hand them
        self.waiting = False
        try:
            os.write(self.wake_fd, b"w")
        except OSError:  # full (a wake-up is pending) or the child is gone
            pass

    def send(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass  # already gone: the reaper will see it

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.wake_fd)
        os.close(self.control_fd)


def describe_status(status: int) -> str:
    """A wait status as an operator reads it: SIGKILL, or exit code N."""
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.WEXITSTATUS(status)}"
