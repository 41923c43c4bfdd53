"""What a hook sees of one attempt: a small, read-only record of the job and how the
attempt ended, built once the outcome is committed. It holds no connection and no
reference to the job or the store: a hook can read it, never change the job."""
import json
from dataclasses import dataclass, field
from typing import Any

from ..jobs import Job, Outcome


@dataclass(frozen=True)
class JobAttempt:
    """One finished attempt of a job, as @prefork.on_success, on_failure and on_dead
    hooks receive it.

    outcome is ``done``, ``retry`` (failed, runs again after ``retry_in`` seconds) or
    ``dead`` (failed for good): a str enum, prefork.jobs.Outcome. For a failure,
    ``exception`` is what the handler raised and ``error`` the text the job row keeps
    (masked, and the class only under ``error_detail = class``).
    """

    job_id: int
    type: str
    queue: str
    number: int            # this attempt's number, from 1
    max_attempts: int
    outcome: Outcome
    key: str | None = None   # the idempotency key, if the job has one
    exception: BaseException | None = None
    error: str | None = None
    retry_in: float | None = None
    payload_text: str = field(default="{}", repr=False)

    @classmethod
    def of(cls, job: Job, outcome: Outcome, **failure: Any) -> "JobAttempt":
        """The attempt of `job` that ended in `outcome` (failure: exception, error,
        retry_in)."""
        return cls(job.id, job.type, job.queue, job.attempt, job.max_attempts, outcome,
                   job.idempotency_key, payload_text=job.payload_text, **failure)

    @property
    def dead(self) -> bool:
        """Whether the job went to dead with this attempt."""
        return self.outcome is Outcome.DEAD

    def payload(self) -> dict[str, Any] | None:
        """A fresh copy of the job's payload, decoded from its JSON; None when the
        payload is not a JSON object (the attempt may have failed for that)."""
        try:
            decoded = json.loads(self.payload_text)
        except (ValueError, RecursionError):
            return None
        return decoded if isinstance(decoded, dict) else None
