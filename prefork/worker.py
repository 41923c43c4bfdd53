"""The worker loop: claim one job, run its handler with no transaction open,
finish it with a lease-fenced write, repeat.

Used as is by `prefork-queue work` and inside each forked child of the
supervisor. The loop never handles signals itself: whoever owns the process
calls request_stop() (a flag, safe from a signal handler).
"""
import signal
import time
from contextlib import contextmanager

from . import registry
from .errors import CommandFailed, JobTimeout, LeaseLost, PermanentError, QuickStop, RejectedJob
from .logs import current_host_pid, error_class, event
from .retry import RetryPolicy
from .wakeup import Waker

FIRST_IDLE_SLEEP = 0.05


class Worker:
    def __init__(self, store, config, on_state=None, waker=None, idle_sleeps=None,
                 process_id=None):
        self.store = store
        self.config = config
        self.process_id = process_id   # our supervisor's registry id (None: no supervisor)
        self.policy = RetryPolicy.from_config(config)
        self.identity = current_host_pid()
        self.waker = waker or Waker()
        # (first, longest) sleep when no job is ready, doubling in between.
        # Alone, we poll; under a supervisor, the parent wakes us instead.
        self.idle_sleeps = idle_sleeps or (FIRST_IDLE_SLEEP, config.poll_interval)
        self.stopping = False
        self.running_handler = False
        self.processed = 0
        # on_state(state, job, outcome): lets the owner mirror what we do
        # (titles, the parent's pipe). outcome is set when a job just ended.
        self.on_state = on_state or (lambda state, job=None, outcome=None: None)

    def request_stop(self):
        """Finish the current job, then stop. Safe to call from a signal handler."""
        self.stopping = True
        self.waker.wake()

    def request_quick_stop(self):
        """Stop now: a running handler is interrupted and its job released unused.
        Safe to call from a signal handler (that is where QuickStop is raised)."""
        self.request_stop()
        if self.running_handler:
            raise QuickStop()

    def run(self, once=False, stop_when_empty=False, max_jobs=None, should_retire=None):
        """Work until stopped, or per the mode; returns the number of jobs processed.

        should_retire(), when given, is asked after each job; a truthy answer
        ends the loop (the child uses it for max-items and max-memory).
        """
        def enough():
            return once or bool(max_jobs and self.processed >= max_jobs) \
                or bool(should_retire and should_retire())

        def chain_next():
            return not (self.stopping or enough())

        event("worker_started", queues=",".join(self.config.queues), worker=self.identity)
        idle_sleep = self.idle_sleeps[0]
        job, queue_empty = None, False
        while not self.stopping:
            if job is None and not queue_empty:
                job = self.claim_next()
            if job is None:
                if once or stop_when_empty:
                    break
                self.on_state("waiting")
                self.waker.sleep(idle_sleep)
                idle_sleep = min(idle_sleep * 2, self.idle_sleeps[1])
                queue_empty = False
                continue
            idle_sleep = self.idle_sleeps[0]
            outcome, job, queue_empty = self.process(job, chain_next)
            self.on_state("idle", None, outcome)
            if job is None and enough():
                break
        event("worker_stopped", processed=self.processed, worker=self.identity)
        return self.processed

    def claim_next(self):
        jobs = self.store.claim(self.config.queues, self.identity, self.config.lease_seconds,
                                process_id=self.process_id)
        return jobs[0] if jobs else None

    def process(self, job, chain_next=lambda: False):
        """Run one claimed job to its recorded outcome: done, retry, dead, lost or released.

        Returns (outcome, next job, queue found empty). When the job succeeds
        and chain_next() agrees, its completion also claims the next job, in
        the same round trip and commit.
        """
        if self.stopping:
            # The stop won the race with the claim: give the job back unrun.
            if self.store.release(job):
                event("claim_released_on_shutdown", job_id=job.id, type=job.type)
            return "released", None, False
        self.processed += 1
        self.on_state("busy", job)   # first: the parent must know what we hold
        event("job_claimed", job_id=job.id, type=job.type, queue=job.queue, attempt=job.attempt)
        started = time.monotonic()
        try:
            self.run_handler(job)
        except Exception as exc:  # a handler's failure is the job's, not the worker's
            return self.record_handler_error(job, exc), None, False
        except QuickStop:
            return self.release_interrupted(job), None, False
        next_job, tried_next = None, False
        if job.finished:
            completed = True
        elif chain_next():
            completed, next_job = self.store.complete_and_claim(
                job, self.config.queues, self.identity, self.config.lease_seconds,
                process_id=self.process_id)
            tried_next = True
        else:
            completed = self.store.complete(job)
        if not completed:
            return self.lease_lost(job), next_job, tried_next and next_job is None
        event("job_completed", job_id=job.id, type=job.type,
              elapsed_ms=round((time.monotonic() - started) * 1000, 1))
        return "done", next_job, tried_next and next_job is None

    def record_handler_error(self, job, exc):
        if isinstance(exc, LeaseLost):
            return self.lease_lost(job)
        if isinstance(exc, (RejectedJob, JobTimeout, CommandFailed)):  # our own messages
            return self.record_failure(job, str(exc), permanent=isinstance(exc, RejectedJob))
        return self.record_failure(job, error_class(exc),
                                   permanent=isinstance(exc, PermanentError))

    def run_handler(self, job):
        handler = registry.lookup(job.type)
        if handler is None:
            raise RejectedJob("unknown job type")
        job.decode_payload(self.config.max_payload_bytes)
        soft_timeout, _ = registry.timeouts(job.type, self.config)
        self.running_handler = True
        try:
            with soft_deadline(soft_timeout):
                handler(job)
        finally:
            self.running_handler = False

    def release_interrupted(self, job):
        if job.finished:
            return "done"
        if self.store.release(job):
            event("claim_released_on_shutdown", job_id=job.id, type=job.type, interrupted=True)
            return "released"
        return self.lease_lost(job)

    def record_failure(self, job, error, permanent):
        decision = self.policy.decide(job.attempt, job.max_attempts, permanent)
        if not self.store.fail(job, error, decision):
            return self.lease_lost(job)
        if decision.dead:
            event("job_dead", job_id=job.id, type=job.type, attempt=job.attempt, error=error)
            return "dead"
        event("job_failed", job_id=job.id, type=job.type, attempt=job.attempt, error=error,
              retry_in_s=round(decision.delay, 3))
        return "retry"

    @staticmethod
    def lease_lost(job):
        event("job_lease_lost", job_id=job.id, type=job.type)
        return "lost"


@contextmanager
def soft_deadline(seconds):
    """Raise JobTimeout in this (main) thread if the block runs longer than `seconds`."""
    if not seconds:
        yield
        return

    def expire(signum, frame):
        raise JobTimeout(f"soft timeout after {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
