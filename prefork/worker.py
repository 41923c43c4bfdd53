"""The worker loop: claim one job, run its handler with no transaction open,
finish it with a lease-fenced write, repeat.

Used as is by `prefork-queue work` and inside each forked child of the
supervisor. The loop never handles signals itself: whoever owns the process
calls request_stop() (a flag, safe from a signal handler).
"""
import time

from . import registry
from .errors import LeaseLost, PermanentError, RejectedJob
from .logs import current_host_pid, error_class, event
from .retry import RetryPolicy
from .wakeup import Waker

FIRST_IDLE_SLEEP = 0.05


class Worker:
    def __init__(self, store, config, on_state=None):
        self.store = store
        self.config = config
        self.policy = RetryPolicy.from_config(config)
        self.identity = current_host_pid()
        self.waker = Waker()
        self.stopping = False
        self.processed = 0
        # on_state(state, job): lets the owner mirror what we do (titles, parent pipe).
        self.on_state = on_state or (lambda state, job=None: None)

    def request_stop(self):
        """Finish the current job, then stop. Safe to call from a signal handler."""
        self.stopping = True
        self.waker.wake()

    def run(self, once=False, stop_when_empty=False, max_jobs=None):
        """Work until stopped, or per the mode; returns the number of jobs processed."""
        event("worker_started", queues=",".join(self.config.queues), worker=self.identity)
        idle_sleep = FIRST_IDLE_SLEEP
        while not self.stopping:
            job = self.claim_next()
            if job is None:
                if once or stop_when_empty:
                    break
                self.on_state("idle")
                self.waker.sleep(idle_sleep)
                idle_sleep = min(idle_sleep * 2, self.config.poll_interval)
                continue
            idle_sleep = FIRST_IDLE_SLEEP
            self.process(job)
            if once or (max_jobs and self.processed >= max_jobs):
                break
        event("worker_stopped", processed=self.processed, worker=self.identity)
        return self.processed

    def claim_next(self):
        jobs = self.store.claim(self.config.queues, self.identity, self.config.lease_seconds)
        return jobs[0] if jobs else None

    def process(self, job):
        """Run one claimed job to its recorded outcome."""
        if self.stopping:
            # The stop won the race with the claim: give the job back unrun.
            if self.store.release(job):
                event("claim_released_on_shutdown", job_id=job.id, type=job.type)
            return
        self.processed += 1
        event("job_claimed", job_id=job.id, type=job.type, queue=job.queue, attempt=job.attempt)
        self.on_state("busy", job)
        started = time.monotonic()
        try:
            self.run_handler(job)
        except LeaseLost:
            event("job_lease_lost", job_id=job.id, type=job.type)
        except RejectedJob as exc:
            self.record_failure(job, str(exc), permanent=True)
        except PermanentError as exc:
            self.record_failure(job, error_class(exc), permanent=True)
        except Exception as exc:  # a handler's failure is the job's, not the worker's
            self.record_failure(job, error_class(exc), permanent=False)
        else:
            if job.finished or self.store.complete(job):
                event("job_completed", job_id=job.id, type=job.type,
                      elapsed_ms=round((time.monotonic() - started) * 1000, 1))
            else:
                event("job_lease_lost", job_id=job.id, type=job.type)
        self.on_state("idle")

    def run_handler(self, job):
        handler = registry.lookup(job.type)
        if handler is None:
            raise RejectedJob("unknown job type")
        job.decode_payload(self.config.max_payload_bytes)
        handler(job)

    def record_failure(self, job, error, permanent):
        decision = self.policy.decide(job.attempt, job.max_attempts, permanent)
        if not self.store.fail(job, error, decision):
            event("job_lease_lost", job_id=job.id, type=job.type)
        elif decision.dead:
            event("job_dead", job_id=job.id, type=job.type, attempt=job.attempt, error=error)
        else:
            event("job_failed", job_id=job.id, type=job.type, attempt=job.attempt, error=error,
                  retry_in_s=round(decision.delay, 3))
