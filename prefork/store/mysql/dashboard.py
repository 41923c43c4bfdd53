"""The MySQL store's dashboard reads and rollup writes, the same in both dialects
(see store/job_search.py for how a filter becomes index reads); a part of
MySQLStore. Statements are named in dashboard_queries.py."""
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pymysql

from ...jobs import utc_now
from ..job_search import Path, find_page, overviews, rollup_window
from ..views import JobFilter, JobPage, JobRow, MinuteCounts, MinutePoint, QueueOverview
from .dashboard_queries import (
    BEGIN_SNAPSHOT,
    DEAD_COUNTS,
    END_SNAPSHOT,
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
    REPEATABLE_READ_NEXT,
    ROLLUP_LAST_HOUR,
    THROUGHPUT,
    WRITE_MINUTE,
)
from .session import MySQLSession

FIND_STATEMENTS = {Path.ID: FIND_BY_ID, Path.KEY: FIND_BY_KEY, Path.KEY_ONLY: FIND_BY_KEY_ONLY,
                   Path.TYPE: FIND_BY_STATUS_TYPE, Path.QUEUE: FIND_BY_STATUS_QUEUE,
                   Path.STATUS: FIND_BY_STATUS}


class MySQLDashboard(MySQLSession):
    _in_snapshot = False

    # -- the overview and the charts ------------------------------------------------------

    def queue_overview(self) -> list[QueueOverview]:
        with self.snapshot():
            live = self._all(LIVE_DUE_COUNTS) + self._all(DEAD_COUNTS)
            states = self._all(QUEUE_STATES)
            # The supervisors stamp the rollup's minutes with their own clocks.
            rollup = self._named(ROLLUP_LAST_HOUR, rollup_window(utc_now()))
        return overviews(live, states, rollup)

    def throughput(self, since: datetime, queue: str | None = None) -> list[MinutePoint]:
        return [MinutePoint(minute, int(done), int(failed), int(dead))
                for minute, done, failed, dead
                in self._named(THROUGHPUT, {"since": since, "queue": queue})]

    # -- the Jobs page ----------------------------------------------------------------------

    def find_jobs(self, job_filter: JobFilter, after_id: int | None, limit: int) -> JobPage:
        return find_page(self, job_filter, after_id, limit)

    def read_page(self, path: Path, params: dict[str, Any]) -> list[JobRow]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(FIND_STATEMENTS[path], params)
            return list(cursor.fetchall())

    def created_id(self, first: bool, moment: datetime) -> int | None:
        statement, name = (FIRST_CREATED_FROM, "since") if first else (LAST_CREATED_BEFORE, "until")
        rows = self._named(statement, {name: moment})
        return int(rows[0][0]) if rows else None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only REPEATABLE READ transaction: its reads see one snapshot."""
        if self._in_snapshot:
            yield   # inside one of ours already
            return
        with self.conn.cursor() as cursor:
            cursor.execute(REPEATABLE_READ_NEXT)
            cursor.execute(BEGIN_SNAPSHOT)
        self._in_snapshot = True
        try:
            yield
        except BaseException:
            self._rollback_quietly()   # the connection may be gone: the caller's error wins
            raise
        else:
            with self.conn.cursor() as cursor:
                cursor.execute(END_SNAPSHOT)
        finally:
            self._in_snapshot = False

    # -- the rollup ---------------------------------------------------------------------------

    def write_minutes(self, process_id: int, host: str, counts: Sequence[MinuteCounts]) -> None:
        if not counts:
            return
        rows = [row.params(process_id, host) for row in counts]

        def write() -> None:
            with self._transaction() as cursor:
                for row in rows:
                    cursor.execute(WRITE_MINUTE, row)
        self._retry_contention(write)

    def _named(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

