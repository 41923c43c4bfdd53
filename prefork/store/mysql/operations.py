"""The MySQL store's operator tables: the supervisor registry, paused queues,
restart requests, status, pruning. A part of MySQLStore; its statements are
named in queries.py.

Every time is the server's UTC_TIMESTAMP(6), so hosts with skewed clocks agree.
"""
import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ...jobs import JobStatus
from ..contract import SILENT_SUPERVISOR_ERROR, HeldJob, StatusRows, spare_none
from .dashboard_queries import PRUNE_MINUTES
from .limit_queries import PRUNE_LIMIT_GROUPS
from .queries import (
    CONTROL,
    COUNT_FINISHED,
    DISCARD_DEAD,
    DISCARD_DEAD_RESULTS,
    DONE_SINCE,
    HEARTBEAT,
    JOBS_OF,
    LIVE_COUNTS,
    MARK_PRUNED,
    PAUSED_QUEUES,
    PRUNE_FINISHED,
    PRUNE_FINISHED_RESULTS,
    PRUNE_PROCESSES,
    REGISTER,
    REQUEST_RESTART,
    RESTART_REQUESTED,
    RETURN_JOBS_OF,
    RUNNING_PROCESSES,
    SET_PAUSED,
    SILENT,
    STOP,
    placeholders,
)
from .members import MySQLMembers
from .workflows import MySQLFlows
from .session import micros


class MySQLOperations(MySQLMembers):
    # -- the supervisor registry -----------------------------------------------

    def register_process(self, host: str, pid: int, queues: Sequence[str], workers: int,
                         version: str) -> int:
        with self.conn.cursor() as cursor:
            cursor.execute(REGISTER, (host, pid, ",".join(queues), workers, version))
            return cursor.lastrowid

    def heartbeat(self, process_id: int, queues: Sequence[str], workers: int,
                  children_json: str) -> bool:
        return self._rowcount(HEARTBEAT, (",".join(queues), workers, children_json,
                                          process_id)) == 1

    def stop_process(self, process_id: int) -> None:
        self._rowcount(STOP, (process_id,))

    def prune_silent(self, silent_seconds: float, limit: int = 10,
                     spare: Callable[[HeldJob], bool] = spare_none) -> list[tuple[int, int]]:
        pruned = []
        for (process_id,) in self._all(SILENT, (micros(silent_seconds), limit)):
            returned = self._retry_contention(
                functools.partial(self._prune_one, process_id, silent_seconds, spare))
            if returned is not None:
                pruned.append((process_id, returned))
        return pruned

    def _prune_one(self, process_id: int, silent_seconds: float,
                   spare: Callable[[HeldJob], bool]) -> int | None:
        with self._transaction() as cursor:
            if cursor.execute(MARK_PRUNED, (process_id, micros(silent_seconds))) != 1:
                return None   # it beat again, or another supervisor got there first
            cursor.execute(JOBS_OF, (process_id,))
            rows = [row for row in cursor.fetchall()
                    if not spare(HeldJob(row[0], row[1] or "", row[2] / 1e6))]
            if not rows:
                return 0
            members = self._lock_members(cursor, [row[0] for row in rows if row[3]], process_id)
            ids = [row[0] for row in rows]
            returned = cursor.execute(RETURN_JOBS_OF.format(ids=placeholders(len(ids))),
                                      (SILENT_SUPERVISOR_ERROR, *ids, process_id))
            MySQLFlows(cursor).settle_returned(members)
            return returned

    # -- control ---------------------------------------------------------------------

    def control_state(self, host: str) -> tuple[datetime, datetime | None, set[str]]:
        now, restart_at, paused = self._one(CONTROL, (host,))
        return now, restart_at, set(paused.split(",")) if paused else set()

    def request_restart(self, host: str, at: datetime | None = None) -> datetime:
        self._rowcount(REQUEST_RESTART, (host, at))
        requested_at: datetime = self._one(RESTART_REQUESTED, (host,))[0]
        return requested_at

    def set_paused(self, queue: str, paused: bool) -> None:
        self._rowcount(SET_PAUSED, (queue, 1 if paused else 0))

    # -- status and pruning -------------------------------------------------------------

    def running_processes(self) -> list[dict[str, Any]]:
        return self._dicts(RUNNING_PROCESSES, ())

    def status(self, done_window_seconds: float = 3600) -> StatusRows:
        processes = self.running_processes()
        live = self._all(LIVE_COUNTS)
        done: dict[str, int] = dict(self._all(DONE_SINCE, (micros(done_window_seconds),)))
        paused = {row[0] for row in self._all(PAUSED_QUEUES)}
        return processes, live, done, paused

    def count_finished(self, status: JobStatus, older_than_seconds: float) -> int:
        return int(self._one(COUNT_FINISHED, (JobStatus(status).value,
                                              micros(older_than_seconds)))[0])

    def prune_finished(self, status: JobStatus, older_than_seconds: float,
                       batch: int = 1000) -> int:
        args = (JobStatus(status).value, micros(older_than_seconds), batch)
        self._rowcount(PRUNE_FINISHED_RESULTS, args)
        return self._rowcount(PRUNE_FINISHED, args)

    def prune_processes(self, older_than_seconds: float, batch: int = 1000) -> int:
        deleted = self._rowcount(PRUNE_PROCESSES, (micros(older_than_seconds), batch))
        # The rollup (a few rows per supervisor, queue and type each minute) and the
        # limited groups not refilled since (one per type and concurrency key).
        for statement in (PRUNE_MINUTES, PRUNE_LIMIT_GROUPS):
            while True:
                rows = self._rowcount(statement, (micros(older_than_seconds), batch))
                deleted += rows
                if rows < batch:
                    break
        return deleted

    def discard_dead(self, job_ids: Sequence[int]) -> int:
        if not job_ids:
            return 0
        ids = placeholders(len(job_ids))
        self._rowcount(DISCARD_DEAD_RESULTS.format(ids=ids), list(job_ids))
        return self._rowcount(DISCARD_DEAD.format(ids=ids), list(job_ids))
