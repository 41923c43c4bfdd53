"""What a supervisor's registry row (prefork_processes) tells its readers besides its
heartbeat: the job types it handles and its heartbeat interval, which it publishes
at its start and after each reload; and when a reader takes it for stale.

The supervisor writes them (supervisor/upkeep.py), `status`, the dashboard and
`enqueue` read them: the encoding is here alone. The job types are joined by ","
(no job type has one), as the queues are. A list over MAX_JOB_TYPES_BYTES is not
written at all: NULL, as in a row of a release before schema 0009, says "not
listed", and a reader takes such a supervisor to handle any type.
"""
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional

SEPARATOR = ","
# The most bytes of job types a row lists: 2,000 types of 128 characters, or about
# 8,000 of 30 (what the heartbeat writes of the children is bounded the same).
MAX_JOB_TYPES_BYTES = 256 * 1024
# A supervisor silent for more than this many of its own heartbeat intervals is
# stale (killed or hung: its row stays "running" until another supervisor prunes it).
STALE_BEATS = 2


@dataclass(frozen=True)
class Published:
    """What a supervisor publishes in its row: its job types as the row holds them
    (None: not listed) and its heartbeat interval in seconds."""
    job_types: Optional[str]
    heartbeat_interval: float

    @classmethod
    def of(cls, job_types: Iterable[str], heartbeat_interval: float) -> "Published":
        """The row's values for these job types (None past the bound) and interval."""
        text = SEPARATOR.join(sorted(set(job_types)))
        listed = text if len(text.encode("utf-8")) <= MAX_JOB_TYPES_BYTES else None
        return cls(listed, float(heartbeat_interval))


def row_values(published: Optional[Published]) -> tuple[Optional[str], Optional[float]]:
    """(job_types, heartbeat_interval) as a row holds them; None: not published."""
    if published is None:
        return None, None
    return published.job_types, published.heartbeat_interval


def job_types(text: Optional[str]) -> Optional[frozenset[str]]:
    """The job types a row lists; None when it lists none (any type may be handled)."""
    if text is None:
        return None
    return frozenset(text.split(SEPARATOR)) if text else frozenset()


def interval_of(row: dict[str, Any], fallback: float) -> float:
    """A row's heartbeat interval; `fallback` (the reader's own) when it published none."""
    published = row.get("heartbeat_interval")
    return fallback if published is None else float(published)


def is_stale(row: dict[str, Any], fallback_interval: float) -> bool:
    """Whether a running row's heartbeat (heartbeat_age_s, by the database's clock) is
    older than STALE_BEATS of its own intervals."""
    return float(row["heartbeat_age_s"]) > STALE_BEATS * interval_of(row, fallback_interval)
