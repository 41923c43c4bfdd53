"""What runs in a forked child: reset the parent's signal handling, open its own
database connection, run the worker loop, and tell the parent over a pipe what
it holds, so the parent can hand the job back if the child dies.

The messages are those of protocol.py; PipeListener turns the worker's reports
into them.
"""
import _thread
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import psutil

from ..config import Config
from ..errors import UserError
from ..failures import ErrorWriter
from ..jobs import Job, Lease, Outcome
from ..logs import error_class, event
from ..titles import set_title, worker_title
from ..process_signals import BLOCKED_ACROSS_FORK, PARENT_ONLY_SIGNALS
from ..settings import MAX_CLAIM_BATCH, SETTINGS
from ..store import driver_errors, open_store
from ..store.lazy import LazyStore
from ..wakeups.waker import Waker
from ..worker.cancellation import CANCEL_SIGNAL, CancelInbox, signal_handler
from ..worker import output
from ..worker.loop import Worker
from ..worker.parent_pulse import ParentPulse, Watchdog
from . import protocol

BOOT_FAILURE_EXIT = 3   # never got going (database down, schema missing): parent backs off
FATAL_EXIT = 4          # the worker loop hit an unexpected database error
QUICK_EXIT = 5          # SIGQUIT before the worker started: nothing held
STUCK_EXIT = 6          # its handler ran on past a silent parent's quick stop (parent_pulse)
# Idle children wait for the parent's wake-up, saying again every so often
# that they wait (a message to the parent, not a query).
WAITING_REMINDER = 30.0


@dataclass(frozen=True)
class ChildSpec:
    slot: int
    config: Any
    report_fd: int
    wake_fd: int         # the parent writes a byte here when work is ready
    parent_pid: int
    process_id: int      # the supervisor's registry id, recorded with each claim
    max_items: int       # already jittered by the parent; 0 = no limit
    control_fd: int      # the parent writes the ids of our cancelled jobs here
    # Read the schema's version? Not when the parent knows it current: a child forked
    # per job (--max-items 1) would spend a round trip on what the parent read.
    check_schema: bool
    # Asks for SIGQUIT at the parent's death, and exits at once if it is gone already:
    # prepared by the parent (process_signals.preexec_die_with_parent), so that each
    # child does not look prctl up in libc anew (0.3 ms of a child forked per job).
    die_with_parent: Callable[[], None]
    # The parent's last successful heartbeat and lease extension: our watchdog reads them.
    pulse: ParentPulse
    # The job the parent claimed for us (forked per job): run it, and nothing else.
    job: Optional[Job] = None
    # The parent claims our jobs and hands them to us through wake_fd (claimer =
    # supervisor): we claim none ourselves.
    handed: bool = False


def run_child(spec: ChildSpec) -> None:
    """Child entry point; never returns."""
    code = FATAL_EXIT
    try:
        if spec.config.capture_output:
            output.capture()
        code = _child_main(spec)
    except BaseException as exc:  # the child must never fall back into the parent's code
        event("worker_fatal", level=logging.ERROR, error=error_class(exc))
    finally:
        try:
            output.release()   # its last lines: flushed, read and logged
        finally:
            os._exit(code)


def _child_main(spec: ChildSpec) -> int:
    _reset_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, BLOCKED_ACROSS_FORK)
    # The parent's death is a quick stop (SIGQUIT): with nobody left to extend our
    # lease or enforce a hard timeout, the job must not run on unsupervised while
    # the supervisor that replaces ours hands it out again.
    spec.die_with_parent()
    config = spec.config
    title = TitleTicker(spec.slot, config.queues)
    title.show("starting")
    try:
        store = _open_store(spec)
    except (UserError,) + driver_errors() as exc:
        event("worker_boot_failed", level=logging.ERROR, slot=spec.slot,
              error=str(exc) if isinstance(exc, UserError) else _described(config, exc))
        return BOOT_FAILURE_EXIT
    _forget_secrets()
    started = time.monotonic()
    retire = RetirePolicy(spec.max_items, config.max_memory, config.min_lifetime, started)
    pipe = PipeListener(spec.report_fd, title, spec.handed)
    os.set_blocking(spec.control_fd, False)
    cancels = CancelInbox(spec.control_fd, spec.handed)
    waker = Waker(data_fd=spec.wake_fd) if spec.handed else Waker(extra_fd=spec.wake_fd)
    worker = Worker(store, config, pipe, waker=waker,
                    idle_sleeps=(WAITING_REMINDER, WAITING_REMINDER), process_id=spec.process_id,
                    supervised=True, cancels=cancels)
    pipe.on_parent_gone = worker.request_quick_stop
    if spec.handed:
        worker.handed = _handed_jobs(spec.wake_fd, store)
        worker.parent_completes = not worker.hooks.completes_alone()

    def stop(signum: int, frame: object) -> None:
        """SIGTERM from a live parent drains: the job is finished. An orphan's (the
        parent died: we were adopted) stops as quickly as the parent's death would."""
        if os.getppid() == spec.parent_pid:
            worker.request_stop()
        else:
            worker.request_quick_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGQUIT, lambda signum, frame: worker.request_quick_stop())
    if spec.job is not None:   # held, for a cancel that comes before it starts
        worker.held.append(spec.job)
    signal.signal(CANCEL_SIGNAL, signal_handler(cancels, lambda: worker.held,
                                                lambda: worker.running_handler))
    # A parent silent too long (frozen, stuck) is a parent gone: a quick stop (SIGQUIT).
    watchdog = Watchdog(spec.pulse, config)
    worker.may_claim = watchdog.may_claim
    watchdog.start(lambda: worker.running_handler or bool(worker.held),
                   lambda: cancels.current if worker.running_handler else None, STUCK_EXIT)
    if spec.job is None:
        pipe.send(protocol.Ready(_connection_id(store)))
    else:   # not connected; it goes with the job's start: one wake-up of the parent for both
        pipe.defer(protocol.Ready(None))
    try:
        if spec.job is None:
            worker.run(max_jobs=spec.max_items or None,
                       should_retire=lambda: retire.reason(worker.processed))
        else:
            _run_handed(worker, pipe)
    except driver_errors() as exc:
        event("worker_fatal", level=logging.ERROR, error=_described(config, exc))
        pipe.send(protocol.DatabaseFailed())
        return FATAL_EXIT
    reason = retire.reason(worker.processed)
    if reason and not worker.stopping:
        # Ask to be recycled, then idle until the parent says when: once our
        # successor is up (it forks a few at a time, so the pool never recycles
        # all at once).
        title.show(f"retiring {reason}")
        pipe.send(protocol.Retire(reason))
        while not worker.stopping:
            worker.waker.sleep(config.poll_interval)
    pipe.send()   # whatever waits to go with a message that did not come
    title.show("exiting")
    store.close()
    return 0


def _open_store(spec: ChildSpec) -> Any:
    """Our own store: connected now, or (handed a job) on its first use."""
    if spec.job is not None:
        return LazyStore(spec.config, open_store)
    store = open_store(spec.config)
    if spec.check_schema:
        store.check_schema()
    return store


def _handed_jobs(fd: int, store: Any) -> Callable[[], list[Job]]:
    """What the parent handed us since the last look: the jobs of the complete lines
    in our wake-up pipe, bound to our own store (their transaction, a failure)."""
    reader = protocol.LineReader(fd, protocol.decode_job)

    def take() -> list[Job]:
        jobs = reader.read()
        for job in jobs:
            job.bind(store)
        return jobs
    return take


def _run_handed(worker: Worker, pipe: "PipeListener") -> None:
    """Run the job the parent claimed for us (held until now). Its completion is the
    parent's to write when it simply succeeds (unless a success hook waits for it);
    whatever else it needs (its transaction, a failure to record) goes through our own
    store, which connects for it."""
    event("worker_started", queues=",".join(worker.config.queues), worker=worker.identity)
    worker.cancels.receive(worker.held)   # cancels sent before our handler was set
    job = worker.held.popleft()
    job.bind(worker.store)
    worker.parent_completes = not worker.hooks.completes_alone()
    began = time.monotonic()
    outcome = worker.process(job)[0]
    ended = protocol.Idle(outcome, time.monotonic() - began)
    if worker.hooks.wanted(outcome):   # the parent learns the job ended before they run
        pipe.send(ended)
        worker.hooks.run(job, outcome)
    else:
        pipe.defer(ended)   # goes with our Retire
    event("worker_stopped", processed=worker.processed, worker=worker.identity)


class PipeListener:
    """The worker's listener in a child: each report goes to the parent as a
    protocol message, what the worker does shows in the title, and what it writes
    to stdout and stderr is logged with its job (worker/output.py)."""

    def __init__(self, fd: int, title: "TitleTicker", handed: bool = False) -> None:
        self.fd = fd
        self.title = title
        self.handed = handed   # the parent hands us jobs: it knows when we wait
        self.on_parent_gone: Callable[[], None] = lambda: None   # set once the worker exists
        self.deferred: list[protocol.Message] = []

    def defer(self, message: protocol.Message) -> None:
        """Send message with the next one: a child forked per job says it is ready with
        its job's start, and its job's end with its wish to retire."""
        self.deferred.append(message)

    def send(self, *messages: protocol.Message) -> None:
        messages, self.deferred = (*self.deferred, *messages), []
        if messages and not protocol.send(self.fd, *messages):
            self.on_parent_gone()

    def busy(self, job: Job) -> None:
        self.title.show("busy", job)
        self.send(protocol.Busy(job.lease, job.type, job.queue))
        output.running(job)

    def held(self, leases: Sequence[Lease]) -> None:
        self.send(protocol.Held(tuple(leases)))

    def waiting(self) -> None:
        output.running(None)
        self.title.show("idle")
        if not self.handed:
            self.send(protocol.Waiting())

    def idle(self, outcome: Outcome, seconds: float) -> None:
        self.title.show("idle")
        self.send(protocol.Idle(outcome, seconds))

    def saved(self, lost: Sequence[int]) -> None:
        self.send(protocol.Saved(tuple(lost)))

    def returned(self, leases: Sequence[Lease]) -> None:
        # In messages of a claim batch's size at most, each fits one atomic write.
        self.send(*[protocol.Returned(tuple(leases[start:start + MAX_CLAIM_BATCH]))
                    for start in range(0, len(leases), MAX_CLAIM_BATCH)])


def _connection_id(store: Any) -> Optional[int]:
    getter = getattr(store, "connection_id", None)
    return getter() if getter else None


# Listed once, at import in the parent: a child that walked every setting would
# touch (and copy-on-write) the pages of all of them, 0.2 ms of a child per job.
_SECRET_VARIABLES = tuple(setting.env_name for setting in SETTINGS if setting.secret)


def _forget_secrets() -> None:
    """Once connected, drop the secret settings' variables from our environment, so
    that the programs a handler starts do not inherit them. The config keeps the
    values (a reconnection needs them); the parent keeps its environment (a reload
    reads it again)."""
    for name in _SECRET_VARIABLES:
        os.environ.pop(name, None)


def _reset_signals() -> None:
    """Drop the parent's handlers, which would only record signals in our copy of it.

    The parent alone acts on PARENT_ONLY_SIGNALS (a terminal's Ctrl-C reaches the
    whole group). Until the worker exists, SIGTERM simply ends the child: it
    holds no job yet, and SIGQUIT ends it at once.
    """
    for signum in PARENT_ONLY_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    # A job handed at the fork may be cancelled at once: the id waits in the control
    # pipe, read once the worker's handler is set (_run_handed), not our death.
    signal.signal(CANCEL_SIGNAL, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, lambda signum, frame: os._exit(QUICK_EXIT))


class RetirePolicy:
    """Why this child should be recycled now, if it should: max-items or max-memory."""

    def __init__(self, max_items: int, max_memory_mib: int, min_lifetime: float,
                 started: float) -> None:
        self.max_items = max_items
        self.max_memory_bytes = max_memory_mib * 1024 * 1024
        self.min_lifetime = min_lifetime
        self.started = started
        # Only with max-memory: building one reads /proc and runs enough of psutil
        # to cost a child forked per job (--max-items 1) half a millisecond of CPU.
        self.process = psutil.Process() if self.max_memory_bytes else None

    def reason(self, processed: int) -> Optional[str]:
        if self.max_items and processed >= self.max_items:
            return "max-items"
        if self.process is not None and time.monotonic() - self.started >= self.min_lifetime \
                and self.process.memory_info().rss > self.max_memory_bytes:
            return "max-memory"
        return None


class TitleTicker:
    """Keeps the child's title current; while busy, a thread refreshes the elapsed seconds."""

    def __init__(self, slot: int, queues: Sequence[str]) -> None:
        self.slot, self.queues = slot, queues
        self.job: Optional[Job] = None
        self.busy_since = 0.0
        self.state = ""
        self.lock = threading.Lock()
        self.ticking = False

    def show(self, state: str, job: Optional[Job] = None) -> None:
        with self.lock:
            self.job, self.busy_since, self.state = job, time.monotonic(), state
        self._render()
        if job is not None and not self.ticking:
            # A bare thread: threading.Thread's start waits for the thread to run its
            # bookkeeping, three times the CPU, which a child forked per job pays on
            # its only job. Nobody joins this one: the child ends with os._exit.
            _thread.start_new_thread(self._tick, ())
            self.ticking = True

    def _render(self) -> None:
        with self.lock:
            set_title(worker_title(self.slot, self.queues, self.state, self.job,
                                   time.monotonic() - self.busy_since))

    def _tick(self) -> None:
        while True:
            time.sleep(1.0)
            if self.job is not None:
                self._render()


def _described(config: Config, exc: BaseException) -> str:
    """A database error as error_detail allows: what failed, in the server's words and
    masked (e.g. "OperationalError 1045: Access denied for user ..."), or its class."""
    try:
        password = config.password()
    except UserError:   # the password file went away since: nothing of it to mask
        password = None
    return ErrorWriter(config.error_detail, password).describe(exc)
