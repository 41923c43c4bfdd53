"""What the dashboard reads from a store, as typed values (store.contract's read
methods queue_overview, throughput and find_jobs return them), and what a
supervisor writes into the per-minute rollup (write_minutes).

Counts of the rollup: `done` jobs completed, `failed` attempts that failed
(those retried and those that ended dead), `dead` the failed attempts that
ended dead (a subset of `failed`), each in the minute (UTC) the supervisor saw
the outcome. Jobs run outside a supervisor (`prefork-queue work`) and jobs
whose host vanished (returned by lease expiry) are not in the rollup.
"""
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..jobs import JobStatus

# A job: column name -> value, times as naive UTC datetimes. get() returns every
# column; a list page (find_jobs) all but the payload and the error history.
JobRow = dict[str, Any]

MAX_PAGE = 500   # the most rows find_jobs returns in one page


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a Jobs page lists; None matches all. key_prefix matches idempotency
    keys starting with it (literally: % and _ are no wildcards; "" matches all, as
    None); created_from is inclusive, created_to exclusive (naive UTC, or aware:
    converted)."""
    queue: str | None = None
    status: JobStatus | None = None
    job_type: str | None = None
    job_id: int | None = None
    key_prefix: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None


@dataclass(frozen=True)
class JobPage:
    """One page, newest (highest id) first; next_after: pass it as after_id for the
    next page, None when this page is the last."""
    rows: list[JobRow]
    next_after: int | None


@dataclass(frozen=True)
class QueueOverview:
    """One queue now: live counts from the claim index, the last hour from the rollup.
    per_minute: jobs done per minute over the 5 whole minutes before this one;
    oldest_ready_age_s: how long the oldest due job has waited (None: none due)."""
    queue: str
    ready: int
    delayed: int
    reserved: int
    dead: int
    done_last_hour: int
    failed_last_hour: int
    per_minute: float
    oldest_ready_age_s: float | None
    paused: bool
    cancelled: int = 0


@dataclass(frozen=True)
class MinutePoint:
    """One minute of the rollup (UTC, naive, truncated), summed over hosts and types.
    Minutes without a finished job have no point."""
    minute: datetime
    done: int
    failed: int
    dead: int


@dataclass(frozen=True)
class MinuteCounts:
    """What one supervisor writes for one (minute, queue, job type): its final counts
    for that minute, so a write repeated after a lost answer changes nothing."""
    minute: datetime
    queue: str
    job_type: str
    done: int
    failed: int
    dead: int
    run_seconds: float

    def params(self, process_id: int, host: str) -> dict[str, Any]:
        """The named parameters of a dialect's WRITE_MINUTE for these counts."""
        return {"minute": self.minute, "queue": self.queue, "job_type": self.job_type,
                "process_id": process_id, "host": host, "done": self.done,
                "failed": self.failed, "dead": self.dead, "run_seconds": self.run_seconds}
