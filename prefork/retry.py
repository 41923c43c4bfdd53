"""Retry policy: a pure function from an attempt's outcome to a decision.

The store only records the decision; nothing here touches the database.
"""
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from .config import Config
from .errors import PermanentError
from .jobs import MAX_ATTEMPTS_LIMIT, MAX_DELAY, JobStatus

ExceptionClasses = tuple[type[Exception], ...]
# A handler's backoff: seconds after failed attempt n (a function of n, its answer
# checked at each use), or a constant.
Backoff = Callable[[int], object] | float


@dataclass(frozen=True)
class Decision:
    dead: bool
    delay: float  # seconds until the job is ready again (0 when dead)
    # The attempts the job gets under its type's rules, written to its row with the
    # failure so that the row shows the limit that applies (None: the row's own).
    max_attempts: int | None = None


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


@dataclass(frozen=True)
class RetryRules:
    """A job type's own retry rules, from @prefork.handler(retry_on=, discard_on=,
    max_attempts=, backoff=); the defaults are the configured behaviour.

    - An exception of a discard_on class (or a subclass) is dead at once.
    - With retry_on given, only its classes (and subclasses) retry; any other
      exception is dead at once. Without it, every exception retries.
    - PermanentError is always dead at once; discard_on wins over retry_on.
    - max_attempts caps the job's own: a job of this type is dead after
      min(its max_attempts, this) attempts.
    - backoff replaces the configured exponential backoff: seconds, or a function
      of the failed attempt's number (1 for the first) returning seconds. Neither
      is jittered nor capped by retry_cap. A function that raises or returns no
      usable number falls back to the configured backoff.
    """
    retry_on: ExceptionClasses = ()
    discard_on: ExceptionClasses = ()
    max_attempts: int | None = None
    backoff: Backoff | None = None

    @classmethod
    def checked(cls, retry_on: object = (), discard_on: object = (),
                max_attempts: object = None, backoff: object = None) -> "RetryRules":
        """The rules from a decorator's arguments; a one-line TypeError or ValueError
        naming the argument when one is wrong."""
        retry, discard = _classes("retry_on", retry_on), _classes("discard_on", discard_on)
        both = set(retry) & set(discard)
        if both:
            raise ValueError(f"{sorted(c.__name__ for c in both)[0]} is in both retry_on "
                             "and discard_on: say whether it retries or is discarded")
        if max_attempts is not None and (type(max_attempts) is not int
                                         or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT):
            raise ValueError(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS_LIMIT}, "
                             f"not {max_attempts!r}")
        return cls(retry, discard, max_attempts, _checked_backoff(backoff))

    def permanent(self, exc: BaseException) -> bool:
        """Whether this failure sends the job to dead whatever attempts it has left."""
        if isinstance(exc, PermanentError) or isinstance(exc, self.discard_on):
            return True
        return bool(self.retry_on) and not isinstance(exc, self.retry_on)

    def limit(self, max_attempts: int) -> int:
        """The attempts a job enqueued with max_attempts gets under these rules."""
        return max_attempts if self.max_attempts is None else min(max_attempts, self.max_attempts)

    def decide(self, exc: BaseException, attempt: int, max_attempts: int,
               policy: "RetryPolicy") -> Decision:
        """The decision after attempt `attempt` of a job failed with exc."""
        limit = self.limit(max_attempts)
        decision = replace(policy.decide(attempt, limit, self.permanent(exc)),
                           max_attempts=limit)
        if decision.dead or self.backoff is None:
            return decision
        return replace(decision, delay=self.own_delay(attempt, decision.delay))

    def own_delay(self, attempt: int, configured: float) -> float:
        """The handler's backoff after failed attempt `attempt`; `configured` (the
        policy's) when its function raises or answers no usable number of seconds."""
        if not callable(self.backoff):
            return float(self.backoff or 0.0)
        try:
            seconds = self.backoff(attempt)
        except Exception:   # a user's function failed: the job still gets its retry
            return configured
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not seconds >= 0:   # not a number, negative or NaN
            return configured
        return min(float(seconds), MAX_DELAY)


def _classes(name: str, value: object) -> ExceptionClasses:
    """An exception class or a tuple (or list) of them, as a tuple; TypeError otherwise."""
    checked: list[type[Exception]] = []
    for cls in value if isinstance(value, (tuple, list)) else (value,):
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise TypeError(f"{name} must be exception classes (a class or a tuple of them), "
                            f"not {cls!r}")
        checked.append(cls)
    return tuple(checked)


def _checked_backoff(backoff: object) -> Backoff | None:
    if backoff is None or callable(backoff):
        return backoff
    if isinstance(backoff, (int, float)) and not isinstance(backoff, bool) \
            and math.isfinite(backoff) and 0 <= backoff <= MAX_DELAY:
        return float(backoff)
    raise ValueError(f"backoff must be seconds from 0 to {MAX_DELAY} or a function of the "
                     f"attempt number, not {backoff!r}")


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
