"""Which queues and priorities a claim reads (due_queries.py): the claims, the
group completions that claim, and the ready count of the MySQL store ask the
server once where due jobs are, then read only there, queue by queue in the
caller's order and priority by priority.
"""
from collections.abc import Sequence
from typing import Any, NamedTuple

from .due_queries import due_levels
from .session import MySQLSession, Row

# The most due priorities of one queue a claim reads at once ({levels}). A queue
# with more is read in its first MAX_LEVELS (the most urgent) until those run
# dry; the queues after it wait meanwhile, as they would behind its jobs.
MAX_LEVELS = 32


class Target(NamedTuple):
    """Where a claim reads: a queue and some of its due priorities, in order."""
    queue: str
    priorities: tuple[int, ...]


def target_args(target: Target) -> tuple[Any, ...]:
    """The parameters of a target in a claim's statements: queue, its priorities,
    queue again (the pause check)."""
    return (target.queue, *target.priorities, target.queue)


class MySQLDue(MySQLSession):
    def _due_targets(self, queues: Sequence[str]) -> list[Target]:
        """The queues with due jobs without limits, in the order given, each with its
        due priorities (an empty list: nothing is due)."""
        if not queues:
            return []
        return targets(queues, self._all(due_levels(len(queues)), list(queues)))


def targets(queues: Sequence[str], rows: Sequence[Row]) -> list[Target]:
    """The (queue, priority) rows of due_levels() as targets in the order of
    `queues`, each with its MAX_LEVELS most urgent priorities; none after a queue
    that has more."""
    found: dict[str, list[int]] = {}
    for queue, priority in rows:
        found.setdefault(queue, []).append(int(priority))
    chosen = []
    for queue in dict.fromkeys(queues):   # each once, where first listed
        if queue in found:
            due = sorted(found[queue])
            chosen.append(Target(queue, tuple(due[:MAX_LEVELS])))
            if len(due) > MAX_LEVELS:
                break
    return chosen
