"""What a publish of the rules replaced (Store.publish_limits). The database holds
one rule per type and the last supervisor to publish one wins, so a publish that
replaces a different rule says so: `limit_replaced`, in the log of the one that
published, names the type, the rule in force before and the one now."""
from collections.abc import Iterable, Mapping, Sequence

from ..events import Event
from ..logs import event
from .rules import LimitRule


def describe(rule: LimitRule | None) -> str:
    """A rule's limits as a log shows them: 'concurrency 3, rate 100/m', or 'none'."""
    if rule is None:
        return "none"
    terms = ([] if rule.concurrency is None else [f"concurrency {rule.concurrency}"]) + \
        ([] if rule.rate is None else [f"rate {rule.rate}"])
    return ", ".join(terms) or "none"


def log_replaced(published: Mapping[str, LimitRule], rules: Sequence[LimitRule],
                 removed: Iterable[str]) -> None:
    """limit_replaced for each published rule that `rules` changed or `removed` deleted
    (the types this publisher handles without a rule)."""
    now: dict[str, LimitRule | None] = {rule.job_type: rule for rule in rules}
    now.update(dict.fromkeys(removed))
    for job_type, rule in sorted(now.items()):
        before = published.get(job_type)
        if before is not None and before != rule:
            event(Event.LIMIT_REPLACED, job_type=job_type, replaced=describe(before),
                  now=describe(rule))
