"""The SQLite store's dashboard reads and rollup writes (see store/job_search.py for
how a filter becomes index reads); a part of SQLiteStore. Statements are named
in dashboard_queries.py; times are stored text (file.py)."""
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from typing import Any

from ...jobs import utc_now
from ..job_search import Path, find_page, overviews, rollup_window
from ..views import JobFilter, JobPage, JobRow, MinuteCounts, MinutePoint, QueueOverview
from .dashboard_queries import (
    BEGIN_READ,
    ENDED_COUNTS,
    END_READ,
    FIND_BY_ID,
    FIND_BY_KEY,
    FIND_BY_KEY_ONLY,
    FIND_BY_STATUS,
    FIND_BY_STATUS_QUEUE,
    FIND_BY_STATUS_TYPE,
    FIRST_CREATED_FROM,
    LAST_CREATED_BEFORE,
    LIVE_DUE_COUNTS,
    QUEUE_STATES,
    ROLLUP_LAST_HOUR,
    THROUGHPUT,
    WRITE_MINUTE,
)
from .file import stamp
from .session import SQLiteSession

# A key range's open end: SQLite orders every BLOB after every TEXT value.
ABOVE_ALL_TEXT = b""

FIND_STATEMENTS = {Path.ID: FIND_BY_ID, Path.KEY: FIND_BY_KEY, Path.KEY_ONLY: FIND_BY_KEY_ONLY,
                   Path.TYPE: FIND_BY_STATUS_TYPE, Path.QUEUE: FIND_BY_STATUS_QUEUE,
                   Path.STATUS: FIND_BY_STATUS}


class SQLiteDashboard(SQLiteSession):
    # -- the overview and the charts ------------------------------------------------------

    def queue_overview(self) -> list[QueueOverview]:
        now = utc_now()
        with self.snapshot():
            live = [(queue, status, due, count, _age(now, oldest))
                    for statement in (LIVE_DUE_COUNTS, ENDED_COUNTS)
                    for queue, status, due, count, oldest
                    in self._rows(statement, {"now": stamp(now)})]
            states = self._rows(QUEUE_STATES, {})
            window = {name: stamp(moment) for name, moment in rollup_window(now).items()}
            rollup = self._rows(ROLLUP_LAST_HOUR, window)
        return overviews(live, states, rollup)

    def throughput(self, since: datetime, queue: str | None = None) -> list[MinutePoint]:
        return [MinutePoint(datetime.fromisoformat(minute), done, failed, dead)
                for minute, done, failed, dead
                in self._rows(THROUGHPUT, {"since": stamp(since), "queue": queue})]

    # -- the Jobs page ----------------------------------------------------------------------

    def find_jobs(self, job_filter: JobFilter, after_id: int | None, limit: int) -> JobPage:
        return find_page(self, job_filter, after_id, limit)

    def read_page(self, path: Path, params: dict[str, Any]) -> list[JobRow]:
        if params["key_high"] is None:
            params = {**params, "key_high": ABOVE_ALL_TEXT}
        return self._read_dicts(FIND_STATEMENTS[path], _stamped(params))

    def created_id(self, first: bool, moment: datetime) -> int | None:
        statement, name = (FIRST_CREATED_FROM, "since") if first else (LAST_CREATED_BEFORE, "until")
        rows = self._rows(statement, {name: stamp(moment)})
        return int(rows[0][0]) if rows else None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: WAL gives its reads the snapshot of its first one."""
        conn = self._connection()
        if conn.in_transaction:   # inside another read of ours already
            yield
            return
        self._read(BEGIN_READ).close()
        try:
            yield
        finally:
            conn.execute(END_READ)

    # -- the rollup ---------------------------------------------------------------------------

    def write_minutes(self, process_id: int, host: str, counts: Sequence[MinuteCounts]) -> None:
        if not counts:
            return
        with self._write() as cursor:
            cursor.executemany(WRITE_MINUTE, [_stamped(row.params(process_id, host))
                                              for row in counts])

    def _rows(self, sql: str, params: dict[str, Any]) -> list[Any]:
        with closing(self._read(sql, params)) as cursor:
            return cursor.fetchall()


def _age(now: datetime, oldest: str | None) -> float | None:
    """Seconds since a stored time (None stays None)."""
    return None if oldest is None else (now - datetime.fromisoformat(oldest)).total_seconds()


def _stamped(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters with their times as stored text."""
    return {name: stamp(value) if isinstance(value, datetime) else value
            for name, value in params.items()}
