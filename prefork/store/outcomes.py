"""The part of the store contract (contract.py) where a job's attempt ends: its
completion, with its result, or its failure, with its traceback; and the reads of
what they leave behind.

A result (results.KeptResult; completing() takes job.result) is written in the
transaction that completes its job, only for a job that this completes, and a job
without one costs no statement; one that cannot be kept (ResultRefused) rolls the
completion back. A failure (failures.FailedAttempt) is kept in the failure's
transaction, which forgets the tracebacks of all but the job's last
failures.TRACEBACKS_KEPT attempts. Each write is fenced by the job's lease.
"""
import abc
from collections.abc import Sequence
from typing import Any, ContextManager

from ..failures import AttemptTraceback, FailedAttempt
from ..jobs import Job, Lease
from ..results import JobResult, KeptResult
from ..retry import Decision


class JobOutcomes(abc.ABC):
    def complete(self, job: Job) -> bool:
        """Mark one job done if the token matches and the lease is live (or it is done
        already with this lease). False if the lease was lost."""
        return job.id in self.complete_many([job.lease])

    @abc.abstractmethod
    def complete_many(self, leases: Sequence[Lease],
                      results: Sequence[KeptResult] = ()) -> set[int]:
        """Complete the jobs of these leases, each fenced as complete() is, and write their
        `results`, in one transaction; the set of ids completed (others' leases were lost)."""

    @abc.abstractmethod
    def complete_and_claim(self, leases: Sequence[Lease], queues: Sequence[str], worker: str,
                           lease_seconds: float, process_id: int | None = None,
                           limit: int = 1, results: Sequence[KeptResult] = ()
                           ) -> tuple[set[int], list[Job]]:
        """complete_many(leases, results) and claim up to `limit` next jobs in one
        transaction: (ids completed, [Job])."""

    @abc.abstractmethod
    def completing(self, job: Job) -> ContextManager[Any]:
        """Context manager yielding a cursor (the driver's) inside the completion
        transaction, which writes job.result too. Raises LeaseLost (and rolls back the
        caller's writes) if the lease was lost."""

    @abc.abstractmethod
    def fail(self, job: Job, error: str, decision: Decision,
             failure: FailedAttempt | None = None) -> bool:
        """Record a failed attempt: dead, or ready again after decision.delay; the
        error (cut to failures.MAX_ERROR_LENGTH) becomes last_error and joins the error
        history, decision.max_attempts (if given) max_attempts, and the failure (if
        given) is kept. Fenced like complete(); False if the lease was lost."""

    # -- what they leave behind -------------------------------------------------------
    @abc.abstractmethod
    def job_result(self, job_id: int) -> JobResult | None:
        """The result of a done job, unless it has none (its handler returned None),
        it expired, or the job is not done (or not there)."""

    @abc.abstractmethod
    def failed_attempts(self, job_id: int) -> list[AttemptTraceback]:
        """The tracebacks the job keeps (its last failures.TRACEBACKS_KEPT failed
        attempts'), oldest first."""

    @abc.abstractmethod
    def expire_results(self, limit: int = 1000) -> int:
        """Forget up to `limit` results whose time is over (the oldest first, through
        the expiry index); how many. The supervisors' maintenance calls it."""
