"""Which queues and priorities a claim reads (due_queries.py): the claims, the
group completions that claim, and the ready count of the MySQL store ask the
server once where due jobs are, then read only there, queue by queue in the
caller's order and priority by priority.
"""
from collections.abc import Sequence
from typing import Any, NamedTuple

from .due_queries import due_levels
from .session import MySQLSession, Row

# The most due priorities read of one queue, all in one claim statement
# ({levels}). A queue with more is read in its first MAX_LEVELS (the most urgent)
# until those run dry; the queues after it wait meanwhile, as they would behind
# its jobs.
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
        args = [value for position, queue in enumerate(queues)
                for value in (position, queue, queue, MAX_LEVELS)]
        return targets(queues, self._all(due_levels(len(queues)), args))


def targets(queues: Sequence[str], rows: Sequence[Row]) -> list[Target]:
    """The (position, priority) rows of due_levels() as targets, by queue position;
    none after a queue that has MAX_LEVELS due priorities (it may have more)."""
    found: dict[int, list[int]] = {}
    for position, priority in rows:
        found.setdefault(int(position), []).append(int(priority))
    chosen = []
    for position in sorted(found):
        chosen.append(Target(queues[position], tuple(sorted(found[position]))))
        if len(found[position]) >= MAX_LEVELS:
            break
    return chosen
