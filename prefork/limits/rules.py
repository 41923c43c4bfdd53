"""What a limit is: at most `concurrency` jobs of a group running at once, and at
most `rate` starts of a group per period, where a group is a job type and a
concurrency key ('' for the jobs enqueued without one).

Rules are declared in code (`@prefork.handler(..., concurrency=2, rate="100/m")`)
or in a `[command:TYPE]` section (`concurrency = 2`, `rate = 100/m`); a bad one
is a one-line error where it is declared. A supervisor publishes the rules it
declares (prefork_limits, one row per type: the last to publish replaces the
type's row), and every limited claim, on every host, enforces that row.
"""
import re
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import UserError

NO_KEY = ""   # the concurrency_key column of the jobs enqueued without one
PERIODS = {"s": 1, "m": 60, "h": 3600}
RATE_PATTERN = re.compile(r"\A([1-9][0-9]{0,8})/([smh])\Z")
MAX_CONCURRENCY = 1_000_000


class Group(NamedTuple):
    """A limited group: a job type and a concurrency key (NO_KEY: none)."""
    job_type: str
    key: str


@dataclass(frozen=True)
class Rate:
    """At most `count` starts per `seconds`."""
    count: int
    seconds: int

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def __str__(self) -> str:
        unit = next(name for name, seconds in PERIODS.items() if seconds == self.seconds)
        return f"{self.count}/{unit}"


@dataclass(frozen=True)
class LimitRule:
    """The limits of one job type, held per group (type, concurrency key)."""
    job_type: str
    concurrency: int | None = None   # running at once per group; None: no such limit
    rate: Rate | None = None         # starts per period per group; None: no such limit


def parse_rate(text: object) -> Rate:
    """'100/m' (per second, minute or hour) as a Rate; UserError otherwise."""
    match = RATE_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise UserError(f"invalid rate {text!r}: use COUNT/s, COUNT/m or COUNT/h, e.g. 100/m")
    return Rate(int(match.group(1)), PERIODS[match.group(2)])


def check_concurrency(value: object) -> int:
    """A concurrency limit: a whole number from 1 to MAX_CONCURRENCY."""
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 1 <= value <= MAX_CONCURRENCY:
        raise UserError(f"invalid concurrency {value!r}: use a whole number from 1 to "
                        f"{MAX_CONCURRENCY}")
    return value


def rule_for(job_type: str, concurrency: object = None, rate: object = None) -> LimitRule | None:
    """The checked rule of a type from what was declared; None when it declares none."""
    if concurrency is None and rate is None:
        return None
    return LimitRule(job_type,
                     None if concurrency is None else check_concurrency(concurrency),
                     None if rate is None else parse_rate(rate))


def stored_rule(job_type: str, concurrency: int | None, rate_count: int | None,
                rate_seconds: int | None) -> LimitRule:
    """A rule as prefork_limits holds it (a NULL: no such limit)."""
    return LimitRule(job_type, concurrency,
                     None if rate_count is None or rate_seconds is None
                     else Rate(rate_count, rate_seconds))


class LimitUsage(NamedTuple):
    """A limited group as `status`, the metrics and the dashboard show it."""
    job_type: str
    key: str                  # NO_KEY: the type's jobs without a concurrency key
    running: int              # reserved now
    waiting: int              # due and ready, not started
    concurrency: int | None   # the published rule's: the one every claim enforces
    rate: Rate | None

    @classmethod
    def of(cls, rule: LimitRule, key: str, running: int, waiting: int) -> "LimitUsage":
        """A group's usage under its type's published rule."""
        return cls(rule.job_type, key, running, waiting, rule.concurrency, rule.rate)
