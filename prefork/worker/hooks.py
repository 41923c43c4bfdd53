"""Running the hooks of an attempt (@prefork.on_success, on_failure, on_dead) in the
worker, once its outcome is committed and the worker's owner told, so that nothing a
hook does can change the job's state or the worker's bookkeeping.

The hooks of an attempt run one after another in a thread of their own, and the
worker waits for them at most hook_timeout seconds. Whatever a hook raises
(SystemExit from sys.exit() too) is logged as hook_failed. A hook still running at
the bound is left to its thread, logged as hook_timed_out, and the worker goes on;
the next attempt's hooks get a new thread. While MAX_HUNG such threads are still
stuck, an attempt's hooks are skipped (hook_skipped) rather than pile up threads.
"""
import queue
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Optional

from ..events import Event
from ..failures import ErrorWriter
from ..jobs import Job, Outcome
from ..logs import event
from .attempt import JobAttempt

MAX_HUNG = 8
Hook = Callable[[JobAttempt], object]
# The hooks registered for an outcome (registry.hooks_for).
Lookup = Callable[[Outcome], Sequence[Hook]]
FAILURES = (Outcome.RETRY, Outcome.DEAD)


class HookRunner:
    """The worker's side of the hooks: it remembers a recorded failure, then runs the
    hooks of the attempt once the worker says the attempt is over."""

    def __init__(self, timeout: float, errors: ErrorWriter, lookup: Lookup) -> None:
        self.timeout = timeout
        self.errors = errors
        self.lookup = lookup
        self.failure: Optional[JobAttempt] = None   # the failed attempt just recorded
        self.thread: Optional[HookThread] = None
        self.hung: list[HookThread] = []

    def wanted(self, outcome: Outcome) -> bool:
        """Are there hooks to run after an attempt that ended in `outcome`?"""
        return bool(self.lookup(outcome))

    def completes_alone(self) -> bool:
        """Must the worker write each completion at once, on its own? With success hooks:
        a completion may wait neither for its batch's last job nor for the parent (a
        hook runs once it is committed), and no next job may be claimed with it (held
        unreported while the hooks run)."""
        return self.wanted(Outcome.DONE)

    def failed(self, job: Job, exc: BaseException, error: str, retry_in: float) -> None:
        """Remember a failure about to be recorded, for run(): its exception, its error
        as the row keeps it, and when it would run again."""
        self.failure = JobAttempt.of(job, Outcome.RETRY, exception=exc, error=error,
                                     retry_in=retry_in)

    def run(self, job: Job, outcome: Outcome) -> None:
        """Run the hooks of job's attempt that ended in `outcome`, for at most the
        timeout. Call it once the outcome is committed and the owner told."""
        failure, self.failure = self.failure, None
        hooks = self.lookup(outcome)
        if not hooks:
            return
        if failure is not None and failure.job_id == job.id and outcome in FAILURES:
            attempt = replace(failure, outcome=outcome,
                              retry_in=failure.retry_in if outcome is Outcome.RETRY else None)
        else:
            attempt = JobAttempt.of(job, outcome)
        self.hung = [thread for thread in self.hung if thread.alive()]
        if len(self.hung) >= MAX_HUNG:
            event(Event.HOOK_SKIPPED, job_id=job.id, type=job.type, outcome=outcome,
                  hooks_running=len(self.hung))
            return
        if self.thread is None or not self.thread.alive():
            self.thread = HookThread(self.call)
        if not self.thread.run(hooks, attempt, self.timeout):
            event(Event.HOOK_TIMED_OUT, hook=self.thread.current, job_id=job.id, type=job.type,
                  outcome=outcome, timeout_s=self.timeout)
            self.thread.abandoned = True
            self.hung.append(self.thread)
            self.thread = None

    def call(self, hook: Hook, attempt: JobAttempt) -> None:
        """One hook, in the hook thread: what it raises is logged, never propagated."""
        try:
            hook(attempt)
        except BaseException as exc:   # SystemExit too: the hook's end, not the thread's
            event(Event.HOOK_FAILED, hook=hook_name(hook), job_id=attempt.job_id,
                  type=attempt.type, outcome=attempt.outcome, error=self.errors.describe(exc),
                  traceback=self.errors.traceback(exc))


class HookThread:
    """A daemon thread that runs one attempt's hooks at a time. Abandoned (it ends after
    the hook it is stuck in, if ever) once a run outlives its bound."""

    def __init__(self, call: Callable[[Hook, JobAttempt], None]) -> None:
        self.call = call
        self.work: queue.SimpleQueue[tuple[Sequence[Hook], JobAttempt, threading.Event]] = \
            queue.SimpleQueue()
        self.current = ""   # the name of the hook running now
        self.abandoned = False
        self.thread = threading.Thread(target=self.serve, name="prefork-hooks", daemon=True)
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def run(self, hooks: Sequence[Hook], attempt: JobAttempt, timeout: float) -> bool:
        """Hand the hooks over; whether they all returned within `timeout` seconds."""
        done = threading.Event()
        self.work.put((hooks, attempt, done))
        return done.wait(timeout)

    def serve(self) -> None:
        # The worker's signals are the main thread's: none may interrupt us instead.
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while not self.abandoned:
            hooks, attempt, done = self.work.get()
            try:
                for hook in hooks:
                    if self.abandoned:   # the worker gave up on this run: no hook runs late
                        break
                    self.current = hook_name(hook)
                    self.call(hook, attempt)
            finally:
                done.set()


def hook_name(hook: Hook) -> str:
    """module.qualname of a hook function (its repr for another callable)."""
    qualname = getattr(hook, "__qualname__", None)
    return f"{getattr(hook, '__module__', '?')}.{qualname}" if qualname else repr(hook)
