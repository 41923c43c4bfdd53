"""Retry policy: a pure function from an attempt's outcome to a decision.

The store only records the decision; nothing here touches the database.
"""
import random
from dataclasses import dataclass

from .config import Config
from .jobs import JobStatus


@dataclass(frozen=True)
class Decision:
    dead: bool
    delay: float  # seconds until the job is ready again (0 when dead)


@dataclass(frozen=True)
class RetryPolicy:
    base: float = 1.0
    cap: float = 3600.0

    @classmethod
    def from_config(cls, config: Config) -> "RetryPolicy":
        return cls(base=config.retry_base, cap=config.retry_cap)

    def backoff(self, attempt: int) -> float:
        """Delay after failed attempt n: min(cap, base * 2^(n-1)), jittered down by up to 25%.

        Jitter spreads retries of jobs that failed together; jittering down
        keeps the cap a true upper bound.
        """
        try:
            exponential = min(self.cap, self.base * 2.0 ** max(0, attempt - 1))
        except OverflowError:   # past attempt ~1024: far beyond any cap
            exponential = self.cap
        return exponential * random.uniform(0.75, 1.0)

    def decide(self, attempt: int, max_attempts: int, permanent: bool = False) -> Decision:
        if permanent or attempt >= max_attempts:
            return Decision(dead=True, delay=0.0)
        return Decision(dead=False, delay=self.backoff(attempt))


def hand_back_decision(attempts: int, max_attempts: int, crashes: int, cause: str,
                       policy: RetryPolicy, max_crashes: int,
                       charge: bool) -> tuple[JobStatus, float, str]:
    """(status, delay, last_error) for the job of a worker that died of `cause` (e.g. SIGKILL).

    Shared by every store's hand_back(), so the backends cannot disagree on
    when a crashing job is retried and when it is poison.
    """
    if not charge:
        return JobStatus.READY, 0.0, f"worker stopped: {cause}"
    crashes += 1
    if crashes >= max_crashes:
        return JobStatus.DEAD, 0.0, f"crashed its worker {crashes} times: {cause}"
    decision = policy.decide(attempts, max_attempts)
    status = JobStatus.DEAD if decision.dead else JobStatus.READY
    return status, decision.delay, f"worker died: {cause}"
