"""The SQLite store's dashboard reads and rollup writes (see store/job_search.py for
how a filter becomes index reads); a part of SQLiteStore. Statements are named
in dashboard_queries.py; times are stored text (file.py)."""
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from typing import Any

from ..job_search import Path, find_page, overviews, rollup_window
from ..views import JobFilter, JobPage, JobRow, MinuteCounts, MinutePoint, QueueOverview
from .dashboard_queries import (
    BEGIN_READ,
    END_READ,
    FIND_BY_ID,
    FIND_BY_KEY,
    FIND_BY_STATUS,
    FIND_BY_STATUS_QUEUE,
    FIND_BY_STATUS_TYPE,
    FIRST_CREATED_FROM,
    LAST_CREATED_BEFORE,
    QUEUE_STATES,
    ROLLUP_LAST_HOUR,
    THROUGHPUT,
    WRITE_MINUTE,
)
from .file import stamp, utc_now
from .queries import LIVE_COUNTS
from .session import SQLiteSession

FIND_STATEMENTS = {Path.ID: FIND_BY_ID, Path.KEY: FIND_BY_KEY, Path.TYPE: FIND_BY_STATUS_TYPE,
                   Path.QUEUE: FIND_BY_STATUS_QUEUE, Path.STATUS: FIND_BY_STATUS}


class SQLiteDashboard(SQLiteSession):
    # -- the overview and the charts ------------------------------------------------------

    def queue_overview(self) -> list[QueueOverview]:
        now = utc_now()
        with self.snapshot():
            with closing(self._read(LIVE_COUNTS, {"now": stamp(now)})) as cursor:
                live = [(queue, status, due, count,
                         (now - datetime.fromisoformat(oldest)).total_seconds())
                        for queue, status, due, count, oldest in cursor.fetchall()]
            with closing(self._read(QUEUE_STATES)) as cursor:
                states = cursor.fetchall()
            window = {name: stamp(moment) for name, moment in rollup_window(now).items()}
            with closing(self._read(ROLLUP_LAST_HOUR, window)) as cursor:
                rollup = cursor.fetchall()
        return overviews(live, states, rollup)

    def throughput(self, since: datetime, queue: str | None = None) -> list[MinutePoint]:
        with closing(self._read(THROUGHPUT, {"since": stamp(since), "queue": queue})) as cursor:
            return [MinutePoint(datetime.fromisoformat(minute), done, failed, dead)
                    for minute, done, failed, dead in cursor.fetchall()]

    # -- the Jobs page ----------------------------------------------------------------------

    def find_jobs(self, job_filter: JobFilter, after_id: int | None, limit: int) -> JobPage:
        return find_page(self, job_filter, after_id, limit)

    def read_page(self, path: Path, params: dict[str, Any]) -> list[JobRow]:
        return self._read_dicts(FIND_STATEMENTS[path], _stamped(params))

    def created_id(self, first: bool, moment: datetime) -> int | None:
        statement, name = (FIRST_CREATED_FROM, "since") if first else (LAST_CREATED_BEFORE, "until")
        with closing(self._read(statement, {name: stamp(moment)})) as cursor:
            row = cursor.fetchone()
        return None if row is None else int(row[0])

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
            cursor.executemany(WRITE_MINUTE, [
                {"minute": stamp(row.minute), "queue": row.queue, "job_type": row.job_type,
                 "process_id": process_id, "host": host, "done": row.done,
                 "failed": row.failed, "dead": row.dead, "run_seconds": row.run_seconds}
                for row in counts])


def _stamped(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters with their times as stored text."""
    return {name: stamp(value) if isinstance(value, datetime) else value
            for name, value in params.items()}
