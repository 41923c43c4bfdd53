"""Which queues and priorities a claim reads (due_queries.py): the claims, the
group completions that claim, and the ready count of the MySQL store ask the
server once where due jobs are, then read only there, queue by queue in the
caller's order and priority by priority. The limited claim and the look for
limited work (limits.py) ask the same of the limited jobs.
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
        most urgent due priorities (targets(); an empty list: nothing is due)."""
        return targets(due_in(self, queues, limited=False))


def due_in(session: MySQLSession, queues: Sequence[str], limited: bool) -> list[Target]:
    """The queues with due jobs without limits or with them, in the order given, each
    with all its due priorities (in_order()): one read (DUE_LEVELS)."""
    if not queues:
        return []
    return in_order(queues, session._all(due_levels(len(queues), limited), list(queues)))


def in_order(queues: Sequence[str], rows: Sequence[Row]) -> list[Target]:
    """The (queue, priority) rows of due_levels() as targets in the order of `queues`
    (each once, where first listed), each with all its priorities in ascending order."""
    found: dict[str, list[int]] = {}
    for queue, priority in rows:
        found.setdefault(queue, []).append(int(priority))
    return [Target(queue, tuple(sorted(found[queue])))
            for queue in dict.fromkeys(queues) if queue in found]


def targets(due: Sequence[Target]) -> list[Target]:
    """The targets a claim reads: each with its MAX_LEVELS most urgent priorities;
    none after a queue that has more."""
    chosen = []
    for target in due:
        chosen.append(Target(target.queue, target.priorities[:MAX_LEVELS]))
        if len(target.priorities) > MAX_LEVELS:
            break
    return chosen
