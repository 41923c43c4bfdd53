"""The supervisor's side of the limits (prefork.limits): publish the rules in
force here, and look for limited work for its children.

Published at start and after each reload (Store.publish_limits): the jobs of a
limited type are flagged for the limited claim, those of a type whose rule
went are handed back to the plain one. A publish the database refused (it is
away) is tried again on the next pass of the loop.

The look: once per poll (the loop passes at least once a second), when this supervisor has rules, one query
(limited_ready) tells whether limited jobs are due; then one child is woken
for them, a waiting one if there is one, else one that runs a job (it makes
its limited claim once that job ends). One child per poll at most: the
claim that finds a full limit is repeated once a poll, not once a child.
"""
import random
from typing import Any, Optional, Sequence

from ..limits.declared import declared_rules, handled_types
from ..limits.rules import LimitRule
from ..logs import event
from .children import ChildProcess


class SupervisorLimits:
    def __init__(self) -> None:
        self.rules: list[LimitRule] = []
        self.handled: list[str] = []
        self.published = False
        self.next_look_at = 0.0   # monotonic
        self.declared()

    def declared(self) -> None:
        """Take the rules in force now (at start, after a reload); publish them next."""
        self.rules = list(declared_rules().values())
        self.handled = handled_types()
        self.published = False

    def publish_when_due(self, upkeep: Any) -> None:
        """Publish the rules unless they are; again later while the database is away."""
        if self.published or not upkeep.publish_limits(self.rules, self.handled):
            return
        self.published = True
        event("limits_published", limited=",".join(rule.job_type for rule in self.rules))

    def tick(self, now: float, upkeep: Any, children: Sequence[ChildProcess],
             poll_interval: float) -> None:
        """Publish when due; once a poll, wake one child for limited work when some is due."""
        self.publish_when_due(upkeep)
        if not self.rules or now < self.next_look_at:
            return
        self.next_look_at = now + poll_interval
        child = pick_child(children)
        if child is not None and upkeep.limited_ready(1) > 0:
            child.wake()


def pick_child(children: Sequence[ChildProcess]) -> Optional[ChildProcess]:
    """The child to wake for limited work: a waiting one first, else one running a
    job (any: which one ends first is unknown); none that is stopping."""
    wanted = [child for child in children if not child.stopping and child.ready]
    waiting = [child for child in wanted if child.waiting]
    if waiting:
        return waiting[0]
    busy = [child for child in wanted if child.busy]
    return random.choice(busy) if busy else None
