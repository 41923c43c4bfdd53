"""Where the SQLite store's claim and ready count read: each queue in the caller's
order, and in it each priority in turn, only its due jobs (queries.NEXT_PRIORITY).
A statement costs no round trip here, so the priorities are found one index entry
at a time; a queue's range of each priority ends at its first job not yet due.
"""
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...jobs import PRIORITY_RANGE
from .queries import NEXT_PRIORITY

# Runs one statement: a write cursor's execute, or the session's _read.
Execute = Callable[[str, Mapping[str, Any]], sqlite3.Cursor]


def priorities(execute: Execute, queue: str, limited: bool) -> Iterator[int]:
    """The priorities of the ready jobs of `queue` (limited ones or not), lowest
    first; none when the queue is paused. Each is read when asked for."""
    after = PRIORITY_RANGE[0] - 1
    while True:
        row = execute(NEXT_PRIORITY, {"queue": queue, "limited": int(limited),
                                      "after": after}).fetchone()
        if row is None:
            return
        after = int(row[0])
        yield after
