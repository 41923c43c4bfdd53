"""The dialect-neutral half of the dashboard's reads (store/<dialect>/dashboard.py
runs the statements): which index a job filter is read through, how a page is
merged, how an idempotency-key prefix and a time range become index ranges, and
how a queue's overview is put together from the claim index and the rollup.

Keyset paging by id, newest first: each statement reads an index whose range,
after the equalities, is in id order, so a page is a short backward range read
(`id < after_id ... ORDER BY id DESC LIMIT n`) with no sort, whatever the page
number. Without a state filter the four states are read as four such ranges,
in one snapshot, and merged. Two filters cannot be served in id order by any
index: a key prefix (a range of the key index, whose matches are sorted: of a
prefix alone, the index entries only, then the page's rows by id; with other
filters, the matching rows) and a time range (created_at is not indexed in id
order; ids follow creation time, so the range becomes an id range found through
the created_at index, widened by CREATED_SLACK for ids taken out of time order,
and created_at is checked on each row as well).
"""
import enum
import heapq
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, ContextManager, Protocol

from ..errors import UserError
from ..jobs import JobStatus
from .views import MAX_PAGE, JobFilter, JobPage, JobRow, QueueOverview

# Ids and created_at may disagree by this much (concurrent inserts take ids and
# times in different orders; a clock stepped back): the id range of a time range
# is widened by it. A job inserted further out of order can be missed there.
CREATED_SLACK = timedelta(seconds=60)
ID_CEILING = 2 ** 63 - 1   # above every id (BIGINT)
EARLIEST = datetime(1000, 1, 1)   # before every created_at (DATETIME's range starts here)
LATEST = datetime(9999, 12, 31)
LIKE_ESCAPE = "!"          # the ESCAPE character of the key-prefix LIKE
HOUR = timedelta(hours=1)
RATE_MINUTES = 5           # per_minute: jobs done over the whole minutes before this one


class Path(enum.Enum):
    """The index a filter is read through, the most selective first."""
    ID = "id"              # the primary key: one row at most
    KEY = "key"            # ix_prefork_jobs_key: a range of keys, then sorted by id
    KEY_ONLY = "key_only"  # the same for a key prefix alone, sorting index entries only
    TYPE = "type"          # ix_prefork_jobs_status_type (status, job_type, id)
    QUEUE = "queue"        # ix_prefork_jobs_status_queue (status, queue, id)
    STATUS = "status"      # ix_prefork_jobs_status (status, id)


def path_of(job_filter: JobFilter) -> Path:
    if job_filter.job_id is not None:
        return Path.ID
    if job_filter.key_prefix:
        alone = JobFilter(key_prefix=job_filter.key_prefix)
        return Path.KEY_ONLY if job_filter == alone else Path.KEY
    if job_filter.job_type is not None:
        return Path.TYPE
    if job_filter.queue is not None:
        return Path.QUEUE
    return Path.STATUS


def statuses_to_read(job_filter: JobFilter, path: Path) -> list[JobStatus | None]:
    """One read per state for the status-led indexes (the filter's, or each); the
    id and key reads check the state on each row (None: any)."""
    if path in (Path.ID, Path.KEY, Path.KEY_ONLY) or job_filter.status is not None:
        return [job_filter.status]
    return list(JobStatus)


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise UserError(f"page size must be 1 to {MAX_PAGE}, got {limit}")


def naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def created_window(job_filter: JobFilter) -> tuple[datetime, datetime]:
    """[from, to) of created_at, open ends made EARLIEST and LATEST."""
    return (naive_utc(job_filter.created_from) or EARLIEST,
            naive_utc(job_filter.created_to) or LATEST)


def has_time_range(job_filter: JobFilter) -> bool:
    return job_filter.created_from is not None or job_filter.created_to is not None


def like_pattern(prefix: str | None) -> str | None:
    """A LIKE pattern matching keys that start with `prefix` literally (ESCAPE '!')."""
    if prefix is None:
        return None
    escaped = "".join(LIKE_ESCAPE + char if char in "!%_" else char for char in prefix)
    return escaped + "%"


def key_range(prefix: str | None) -> tuple[str | None, str | None]:
    """[low, high) of the keys starting with `prefix` in code-point (binary UTF-8)
    order: high is the prefix with its last character incremented (None: no bound)."""
    if prefix is None:
        return None, None
    stem = prefix
    while stem:
        last = ord(stem[-1]) + 1
        if last == 0xD800:   # surrogates are no characters: the next one is U+E000
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix, stem[:-1] + chr(last)
        stem = stem[:-1]
    return prefix, None


def merge_page(reads: Iterable[Sequence[JobRow]], limit: int) -> JobPage:
    """A page from reads of limit+1 rows each, every read newest first: the newest
    `limit` of them; more exist when anything is left over."""
    merged: list[JobRow] = []
    seen: set[int] = set()
    for row in heapq.merge(*reads, key=lambda row: -int(row["id"])):
        if row["id"] not in seen:
            seen.add(row["id"])
            merged.append(row)
    rows = merged[:limit]
    return JobPage(rows, rows[-1]["id"] if len(merged) > limit else None)


def rollup_window(now: datetime) -> dict[str, datetime]:
    """The minutes an overview reads: the last hour (from hour_ago), and the
    RATE_MINUTES whole minutes before the current one (recent_from to current)."""
    current = now.replace(second=0, microsecond=0)
    return {"hour_ago": current - HOUR, "recent_from": current - timedelta(minutes=RATE_MINUTES),
            "current": current}


def overviews(live: Iterable[Sequence[Any]], states: Iterable[Sequence[Any]],
              rollup: Iterable[Sequence[Any]]) -> list[QueueOverview]:
    """QueueOverviews by queue name from the live counts [(queue, status, due, count,
    oldest age s)], the queue states [(queue, paused)] and the rollup's last hour
    [(queue, done, failed, done in the recent minutes)]."""
    counts: dict[str, dict[str, Any]] = {}

    def of(queue: str) -> dict[str, Any]:
        return counts.setdefault(queue, {"ready": 0, "delayed": 0, "reserved": 0, "dead": 0,
                                         "cancelled": 0,
                                         "done_last_hour": 0, "failed_last_hour": 0,
                                         "per_minute": 0.0, "oldest_ready_age_s": None,
                                         "paused": False})
    for queue, status, due, jobs, oldest_age in live:
        figures = of(queue)
        if status != JobStatus.READY:
            figures[JobStatus(status).value] += int(jobs)
        elif not due:
            figures["delayed"] += int(jobs)
        else:
            figures["ready"] += int(jobs)
            figures["oldest_ready_age_s"] = max(0.0, float(oldest_age))
    for queue, paused in states:
        of(queue)["paused"] = bool(paused)
    for queue, done, failed, recent_done in rollup:
        figures = of(queue)
        figures.update(done_last_hour=int(done), failed_last_hour=int(failed),
                       per_minute=int(recent_done) / RATE_MINUTES)
    return [QueueOverview(queue=queue, **counts[queue]) for queue in sorted(counts)]


class PageReader(Protocol):
    """What find_page needs of a dialect."""

    def read_page(self, path: Path, params: dict[str, Any]) -> list[JobRow]:
        """Run the path's statement with these parameters (see page_params)."""

    def created_id(self, first: bool, moment: datetime) -> int | None:
        """The id of the first job created at or after `moment` (first=True), or of the
        last one created before it; None when there is none."""

    def snapshot(self) -> ContextManager[Any]:
        """A read-only transaction whose reads see one snapshot."""


def find_page(reader: PageReader, job_filter: JobFilter, after_id: int | None,
              limit: int) -> JobPage:
    """Store.find_jobs for any dialect."""
    check_limit(limit)
    path = path_of(job_filter)
    created_from, created_to = created_window(job_filter)
    key_low, key_high = key_range(job_filter.key_prefix or None)
    params: dict[str, Any] = {
        "queue": job_filter.queue, "job_type": job_filter.job_type, "job_id": job_filter.job_id,
        "key_low": key_low, "key_high": key_high,
        "key_pattern": like_pattern(job_filter.key_prefix or None),
        "created_from": created_from, "created_to": created_to,
        "before": ID_CEILING if after_id is None else after_id, "id_min": 0,
        "limit": limit + 1}
    with reader.snapshot():
        if has_time_range(job_filter):
            params["id_min"], high = _id_bounds(reader, created_from, created_to)
            params["before"] = min(params["before"], high)
        reads = [reader.read_page(path, {**params, "status": status})
                 for status in statuses_to_read(job_filter, path)]
    return merge_page(reads, limit)


def _id_bounds(reader: PageReader, created_from: datetime,
               created_to: datetime) -> tuple[int, int]:
    """[low, high) holding the ids of every job created in [created_from, created_to):
    ids out of creation order by less than CREATED_SLACK, a job created before
    created_from - slack has a lower id than any of them, one created from
    created_to + slack on a higher one."""
    low, high = 0, ID_CEILING
    if created_from > EARLIEST:
        before = reader.created_id(False, created_from - CREATED_SLACK)
        low = 0 if before is None else before + 1
    if created_to < LATEST:
        after = reader.created_id(True, created_to + CREATED_SLACK)
        high = ID_CEILING if after is None else after
    return low, high
