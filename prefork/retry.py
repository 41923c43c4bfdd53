"""Retry policy: a pure function from an attempt's outcome to a decision.

The store only records the decision; nothing here touches the database.
"""
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    dead: bool
    delay: float  # seconds until the job is ready again (0 when dead)


@dataclass(frozen=True)
class RetryPolicy:
    base: float = 1.0
    cap: float = 3600.0

    @classmethod
    def from_config(cls, config):
        return cls(base=config.retry_base, cap=config.retry_cap)

    def backoff(self, attempt):
        """Delay after failed attempt n: min(cap, base * 2^(n-1)), jittered down by up to 25%.

        Jitter spreads retries of jobs that failed together; jittering down
        keeps the cap a true upper bound.
        """
        exponential = min(self.cap, self.base * 2.0 ** max(0, attempt - 1))
        return exponential * random.uniform(0.75, 1.0)

    def decide(self, attempt, max_attempts, permanent=False):
        if permanent or attempt >= max_attempts:
            return Decision(dead=True, delay=0.0)
        return Decision(dead=False, delay=self.backoff(attempt))
