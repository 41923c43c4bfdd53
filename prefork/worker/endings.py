"""How a worker records the end of a job that did not simply succeed: a failure (to
retry or dead, as the retry rules decided), a job given back unused, a lost lease.
Each writes through the worker's own store and logs the outcome."""
from typing import Any, Optional

from ..failures import FailedAttempt
from ..jobs import Job, Outcome
from ..logs import event
from ..retry import Decision


def give_back(store: Any, job: Job, event_name: str, **fields: Any) -> bool:
    """Release an unstarted (or interrupted) job, its attempt restored; False when it
    is no longer ours."""
    if not store.release(job):
        return False
    event(event_name, job_id=job.id, type=job.type, **fields)
    return True


def release_interrupted(store: Any, job: Job) -> Outcome:
    """A quick stop interrupted the job's handler: it goes back unused, unless its
    transaction committed already."""
    if job.finished:
        return Outcome.DONE
    if give_back(store, job, "claim_released_on_shutdown", interrupted=True):
        return Outcome.RELEASED
    return lease_lost(job)


def record_failure(store: Any, job: Job, error: str, decision: Decision, traceback: str,
                   failure: Optional[FailedAttempt] = None) -> Outcome:
    """Write a failed attempt as decided: retried later, or dead."""
    if not store.fail(job, error, decision, failure):
        return lease_lost(job)
    if decision.dead:
        event("job_dead", job_id=job.id, type=job.type, attempt=job.attempt, error=error,
              traceback=traceback)
        return Outcome.DEAD
    event("job_failed", job_id=job.id, type=job.type, attempt=job.attempt, error=error,
          retry_in_s=round(decision.delay, 3), traceback=traceback)
    return Outcome.RETRY


def lease_lost(job: Job) -> Outcome:
    event("job_lease_lost", job_id=job.id, type=job.type)
    return Outcome.LOST
