"""The worker loop: claim one job, run its handler with no transaction open,
finish it with a lease-fenced write, repeat.

Used as is by `prefork-queue work` and inside each forked child of the
supervisor. The loop never handles signals itself: whoever owns the process
calls request_stop() (a flag, safe from a signal handler).
"""
import signal
import time
from collections import deque
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence

from .. import registry
from ..errors import CommandFailed, CommitConflict, JobCancelled, JobTimeout, LeaseLost
from ..errors import QuickStop, RejectedJob
from ..failures import ErrorWriter, FailedAttempt, failed_attempt
from ..jobs import Job, Lease, Outcome
from ..logs import current_host_pid, event
from ..results import KeptResult
from ..retry import Decision, RetryPolicy
from ..wakeups.waker import Waker
from .hooks import HookRunner
from .job_time import HOLD_BUDGET, JobClock, batch_size, running_average
from .limited import LimitedClaims
from .cancellation import CancelInbox, record_cancelled
from .endings import give_back, lease_lost, record_failure, release_interrupted
from .listener import QuietListener, WorkerListener
from .returned import results_to_keep, run_of

FIRST_IDLE_SLEEP = 0.05

# What an integration wraps around every handler (set before the fork, so that the
# children inherit it): Django's gives each job fresh database connections.
JobScope = Callable[[Job], ContextManager[object]]
_around_job: Optional[JobScope] = None


def set_around_job(scope: Optional[JobScope]) -> None:
    """Run every handler inside scope(job) from now on (None: nothing around it)."""
    global _around_job
    _around_job = scope


class Worker:
    def __init__(self, store: Any, config: Any, listener: Optional[WorkerListener] = None,
                 waker: Optional[Waker] = None, idle_sleeps: Optional[tuple[float, float]] = None,
                 process_id: Optional[int] = None, supervised: bool = False,
                 cancels: Optional[CancelInbox] = None) -> None:
        self.store = store
        self.config = config
        self.process_id = process_id   # our supervisor's registry id (None: no supervisor)
        self.policy = RetryPolicy.from_config(config)
        self.errors = ErrorWriter(config.error_detail, config.password())
        self.hooks = HookRunner(config.hook_timeout, self.errors, registry.hooks_for)
        self.identity = current_host_pid()
        self.waker = waker or Waker()
        # (first, longest) sleep when no job is ready, doubling in between.
        # Alone, we poll; supervised, the parent looks for all its children
        # and wakes us: a sleep that ends unwoken only says again that we
        # wait (should the parent have lost track), without a query.
        self.idle_sleeps = idle_sleeps or (FIRST_IDLE_SLEEP, config.poll_interval)
        # Supervised, a batch's completions wait for its last job: the parent
        # writes them should a slower job hold them up, or should we die.
        # Alone, nobody would: each is written at once.
        self.supervised = supervised
        self.stopping = False
        self.quick_stopping = False   # a handler about to start must not start
        self.running_handler = False
        self.processed = 0
        self.held: deque[Job] = deque()   # claimed in a batch, not started yet
        # Ran to success, completion not yet written: a batch's completions are
        # written together, with its last job's (and the next claim).
        self.unsaved: list[tuple[Job, float]] = []   # (job, seconds it ran)
        # Running average of job time; None before the first job (the first claim then
        # takes one job), whose time replaces the guess rather than being averaged with it.
        self.job_seconds: Optional[float] = None
        self.clock = JobClock()   # a job's own time: not the time it waited for a CPU
        self.claim_cap: Optional[int] = None   # at most this many jobs to run (None: no cap)
        self.listener: WorkerListener = listener or QuietListener()
        self.limited = LimitedClaims(self)   # claims of limited job types (limited.py)
        self.cancels = cancels or CancelInbox()   # what the parent cancelled (supervised)
        # Asked before each claim (a child's parent silent: no. See parent_pulse.py).
        self.may_claim: Callable[[], bool] = lambda: True
        # Given a job the parent claimed (a child forked per job, or claimer =
        # supervisor): the parent writes its completion when it simply succeeds.
        self.parent_completes = False
        # Handed its jobs by the parent (claimer = supervisor): the jobs handed since
        # the last look. Such a worker claims none itself.
        self.handed: Optional[Callable[[], list[Job]]] = None

    def request_stop(self) -> None:
        """Finish the current job, then stop. Safe to call from a signal handler."""
        self.stopping = True
        self.waker.wake()

    def request_quick_stop(self) -> None:
        """Stop now: a running handler is interrupted and its job released unused.
        Safe to call from a signal handler (that is where QuickStop is raised)."""
        self.quick_stopping = True
        self.request_stop()
        if self.running_handler:
            raise QuickStop()

    def run(self, once: bool = False, stop_when_empty: bool = False,
            max_jobs: Optional[int] = None,
            should_retire: Optional[Callable[[], object]] = None) -> int:
        """Work until stopped, or per the mode; returns the number of jobs processed.

        should_retire(), when given, is asked after each job; a truthy answer
        ends the loop (the child uses it for max-items and max-memory).
        """
        def enough() -> bool:
            return once or bool(max_jobs and self.processed >= max_jobs) \
                or bool(should_retire and should_retire())

        def chain_next() -> bool:
            return not (self.stopping or enough() or self.limited.first_due()) \
                and self.may_claim() and not self.hooks.completes_alone() \
                and self.handed is None

        event("worker_started", queues=",".join(self.config.queues), worker=self.identity)
        self.claim_cap = 1 if once else max_jobs
        idle_sleep = self.idle_sleeps[0]
        job: Optional[Job] = None
        queue_empty = False
        # A job in hand goes through process() even once stopping, which gives it
        # back: a stop can land while a completion claims the next one.
        while not self.stopping or job is not None:
            if job is None and (not queue_empty or self.limited.pending()):
                job = self.claim_next(plain=not queue_empty)
            if job is None:
                if once or stop_when_empty:
                    break
                self.listener.waiting()
                woken = self.waker.sleep(self.limited.sleep_time(idle_sleep))
                idle_sleep = min(idle_sleep * 2, self.idle_sleeps[1])
                queue_empty = self.supervised and not woken
                self.limited.woke(woken)
                continue
            idle_sleep = self.idle_sleeps[0]
            ran, began = job, time.monotonic()
            outcome, job, queue_empty = self.process(job, chain_next)
            self.listener.idle(outcome, time.monotonic() - began)
            self.hooks.run(ran, outcome)   # committed, and the owner told: see hooks.py
            if job is None and enough():
                break
        self.release_held()
        event("worker_stopped", processed=self.processed, worker=self.identity)
        return self.processed

    def claim_next(self, plain: bool = True) -> Optional[Job]:
        """A held job, else a claimed one (plain: may make a plain claim), else
        (handed its jobs) one the parent handed."""
        if self.handed is not None:
            return self.next_handed(self.handed)
        if self.held:
            return self.held.popleft()
        if not self.may_claim():
            return None
        return self.limited.claim_with(self.claim_plain if plain else None)

    def next_handed(self, handed: Callable[[], list[Job]]) -> Optional[Job]:
        """The next job the parent handed us, unless it fell silent: its claims are not
        ours to start then (parent_pulse.py), they go back when its lease runs out."""
        self.held.extend(handed())
        if not self.held or not self.may_claim():
            return None
        return self.held.popleft()

    def claim_plain(self) -> Optional[Job]:
        return self.take(self.store.claim(self.config.queues, self.identity,
                                          self.config.lease_seconds, limit=self.batch_size(),
                                          process_id=self.process_id))

    def batch_size(self) -> int:
        left = None if self.claim_cap is None else self.claim_cap - self.processed
        return batch_size(HOLD_BUDGET if self.job_seconds is None else self.job_seconds,
                          self.config.claim_batch, left)

    def take(self, jobs: Sequence[Job]) -> Optional[Job]:
        """The first claimed job; the others are held, and the owner told about them
        (the parent extends their leases and gives them back should we die)."""
        if not jobs:
            return None
        first, *rest = jobs
        if rest:
            self.held.extend(rest)
            self.listener.held([job.lease for job in self.held])
        return first

    def release_held(self) -> None:
        """Write the completions not yet saved, then give back claimed, unstarted
        jobs with their attempts restored."""
        if self.unsaved:
            self.save_completions(self.store.complete_many(leases_of(self.unsaved)))
        if self.handed is not None:
            self.held.extend(self.handed())
        if not self.held:
            return
        held = list(self.held)
        self.held.clear()
        released = self.store.release_many(held)   # one transaction for all of them
        for job in held:
            if job.id in released:
                event("claim_released", job_id=job.id, type=job.type)
        if self.handed is None:
            self.listener.held([])
        else:   # those alone: the parent may have handed more since we looked
            self.listener.returned([job.lease for job in held])

    def save_completions(self, completed_ids: Sequence[int]) -> None:
        """Log the outcome of the unsaved completions just written (the ids in
        completed_ids were completed, the others' leases lost) and tell the owner."""
        lost = [job.id for job, _ in self.unsaved if job.id not in completed_ids]
        for job, seconds in self.unsaved:
            if job.id in completed_ids:
                log_completed(job, seconds)
            else:
                lease_lost(job)
        self.unsaved = []
        self.listener.saved(lost)

    def process(self, job: Job, chain_next: Callable[[], bool] = lambda: False
                ) -> tuple[Outcome, Optional[Job], bool]:
        """Run one claimed job to its recorded outcome: done, retry, dead, lost or
        released, or unsaved (done, its completion to be written with the batch's
        last job's; reported later, by listener.saved()).

        Returns (outcome, next job, queue found empty). When the job succeeds
        and chain_next() agrees, its completion also claims the next jobs, in
        the same round trip and commit.
        """
        if self.stopping:
            # The stop won the race with the claim: give the job back unrun (a handed
            # one with the rest of them: release_held()).
            if self.handed is not None:
                self.held.appendleft(job)
            else:
                give_back(self.store, job, "claim_released_on_shutdown")
            return Outcome.RELEASED, None, False
        self.processed += 1
        self.cancels.start(job, self.held)
        self.listener.busy(job)   # first: the parent must know what we run
        self.limited.started(job)
        event("job_claimed", job_id=job.id, type=job.type, queue=job.queue, attempt=job.attempt)
        job.run = run_of(self.identity, self.config)
        started = self.clock.start()
        try:
            results = self.run_handler(job)
        except JobCancelled:
            self.time_job(started)
            return record_cancelled(self.store, job), None, False
        except BaseException as exc:   # the job's failure, not the worker's: sys.exit() too
            if isinstance(exc, KeyboardInterrupt) and self.stopping:
                raise   # `work`'s second Ctrl-C: the operator's, not the handler's
            if isinstance(exc, QuickStop) and self.quick_stopping:   # else the handler's own
                return release_interrupted(self.store, job), None, False
            self.time_job(started)
            return self.record_handler_error(job, exc), None, False
        self.time_job(started)
        if job.finished:
            log_completed(job, time.monotonic() - started)
            return Outcome.DONE, None, False
        if not results and self.parent_completes:   # (a result is ours to write: returned.py)
            return Outcome.UNSAVED, None, False
        if not results and self.held and self.supervised and not self.hooks.completes_alone():
            # More of the batch to run: its completion is written with the last one's.
            self.unsaved.append((job, time.monotonic() - started))
            return Outcome.UNSAVED, None, False
        return self.complete_batch(job, started, not self.held and chain_next(), results)

    def complete_batch(self, job: Job, started: float, claim_next: bool,
                       results: Sequence[KeptResult]) -> tuple[Outcome, Optional[Job], bool]:
        """Write the completions of the batch's jobs and this one (its last, or one with
        a result), with the next claim when claim_next, in one round trip and commit."""
        leases = leases_of(self.unsaved, job)
        if claim_next:
            completed, claimed = self.store.complete_and_claim(
                leases, self.config.queues, self.identity, self.config.lease_seconds,
                process_id=self.process_id, limit=self.batch_size(), results=results)
        else:
            completed, claimed = self.store.complete_many(leases, results), []
        if self.unsaved:
            self.save_completions(completed)
        next_job = self.take(claimed)
        queue_empty = claim_next and next_job is None
        if job.id not in completed:
            return lease_lost(job), next_job, queue_empty
        log_completed(job, time.monotonic() - started)
        return Outcome.DONE, next_job, queue_empty

    def time_job(self, started: float) -> None:
        """Fold the job's own time (job_time.py) into the running average. After a job
        slower than the hold budget, held jobs are given back: siblings may take them
        now instead of after our next slow job."""
        seconds = self.clock.own_seconds(started)
        self.job_seconds = running_average(self.job_seconds, seconds)
        if seconds > HOLD_BUDGET:
            self.release_held()

    def record_handler_error(self, job: Job, exc: BaseException) -> Outcome:
        """Record a failure as the job type's retry rules decide: the error as the
        error_detail setting says (our own messages as they are), and in the log
        where it was raised."""
        if isinstance(exc, LeaseLost):
            return lease_lost(job)
        if isinstance(exc, CommitConflict):   # contention, not the job's failure
            if give_back(self.store, job, "job_conflict_released", error=str(exc)):
                return Outcome.RELEASED
            return lease_lost(job)
        decision = registry.rules(job.type).decide(exc, job.attempt, job.max_attempts,
                                                   self.policy)
        ours = isinstance(exc, (RejectedJob, JobTimeout, CommandFailed))
        error = str(exc) if ours else self.errors.describe(exc)
        traceback = self.errors.traceback(exc)
        self.hooks.failed(job, exc, error, decision.delay)
        return record_failure(self.store, job, error, decision, traceback,
                              failed_attempt(exc, traceback))

    def run_handler(self, job: Job) -> list[KeptResult]:
        """Run the job's handler; the result to keep with its completion (returned.py)."""
        handler = registry.lookup(job.type)
        if handler is None:
            raise RejectedJob("unknown job type")
        job.decode_payload(self.config.max_payload_bytes)
        soft_timeout, _ = registry.timeouts(job.type, self.config)
        self.running_handler = True
        try:
            if self.quick_stopping:   # came after process() looked, before running_handler
                raise QuickStop()
            self.cancels.check()
            with soft_deadline(soft_timeout), \
                    (_around_job(job) if _around_job else nullcontext()):
                returned = handler(job)
        finally:
            self.running_handler = False
        return results_to_keep(job, returned)


def leases_of(unsaved: Sequence[tuple[Job, float]], job: Optional[Job] = None) -> list[Lease]:
    """The leases of the unsaved jobs, and of job when given."""
    return [done.lease for done, _ in unsaved] + ([job.lease] if job else [])


def log_completed(job: Job, seconds: float) -> None:
    event("job_completed", job_id=job.id, type=job.type, elapsed_ms=round(seconds * 1000, 1))


@contextmanager
def soft_deadline(seconds: Optional[float]) -> Iterator[None]:
    """Raise JobTimeout in this (main) thread if the block runs longer than `seconds`."""
    if not seconds:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise JobTimeout(f"soft timeout after {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
