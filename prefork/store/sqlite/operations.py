"""The SQLite store's operator tables: the supervisor registry, paused queues,
restart requests, status, pruning. A part of SQLiteStore; its statements are
named in queries.py.

Times are this host's UTC clock, as stored text (see file.py).
"""
from collections.abc import Callable, Sequence
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

from ...jobs import JobStatus, utc_now
from ..contract import SILENT_SUPERVISOR_ERROR, HeldJob, StatusRows, spare_none
from .dashboard_queries import PRUNE_MINUTES
from .file import stamp
from .limits_queries import PRUNE_LIMIT_GROUPS
from .queries import (
    CONTROL,
    COUNT_FINISHED,
    DISCARD_DEAD,
    DONE_SINCE,
    HEARTBEAT,
    JOBS_OF,
    LIVE_COUNTS,
    MARK_PRUNED,
    PAUSED_QUEUES,
    PRUNE_FINISHED,
    PRUNE_PROCESSES,
    REGISTER,
    REQUEST_RESTART,
    RETURN_JOBS_OF,
    RETURN_STRAYS,
    RUNNING_PROCESSES,
    SET_PAUSED,
    SILENT,
    STOP,
    placeholders,
)
from .session import SQLiteSession
from .workflows import SQLiteFlows


class SQLiteOperations(SQLiteSession):
    # -- the supervisor registry -----------------------------------------------

    def register_process(self, host: str, pid: int, queues: Sequence[str], workers: int,
                         version: str) -> int:
        with self._write() as cursor:
            cursor.execute(REGISTER, {"host": host, "pid": pid, "queues": ",".join(queues),
                                      "workers": workers, "version": version,
                                      "now": stamp(utc_now())})
            assert cursor.lastrowid is not None   # set by the INSERT
            return cursor.lastrowid

    def heartbeat(self, process_id: int, queues: Sequence[str], workers: int,
                  children_json: str) -> bool:
        return self._write_one(HEARTBEAT, {"id": process_id, "queues": ",".join(queues),
                                           "workers": workers, "children": children_json}) == 1

    def stop_process(self, process_id: int) -> None:
        self._write_one(STOP, {"id": process_id})

    def prune_silent(self, silent_seconds: float, limit: int = 10,
                     spare: Callable[[HeldJob], bool] = spare_none) -> list[tuple[int, int]]:
        pruned = []
        with self._write() as cursor:
            since = _stamp_ago(silent_seconds)
            ids = [row[0] for row in cursor.execute(SILENT, {"since": since, "limit": limit})]
            for process_id in ids:
                cursor.execute(MARK_PRUNED, {"id": process_id, "since": since})
                if cursor.rowcount == 1:
                    pruned.append((process_id, _return_jobs_of(cursor, process_id, spare)))
        return pruned

    def hand_back_strays(self, process_id: int, spare: Callable[[HeldJob], bool]) -> list[int]:
        with self._write() as cursor:
            now = utc_now()
            held = [(job, member) for job, member in _held_jobs(cursor, process_id, now)
                    if not spare(job)]
            strays = [job.job_id for job, _ in held]
            if strays:
                ids, params = placeholders("id", strays)
                cursor.execute(RETURN_STRAYS.format(ids=ids),
                               {**params, "id": process_id, "now": stamp(now)})
                SQLiteFlows(cursor).settle_returned([job.job_id for job, member in held
                                                     if member])
        return strays

    # -- control ---------------------------------------------------------------------

    def control_state(self, host: str) -> tuple[datetime, datetime | None, set[str]]:
        with closing(self._read(CONTROL, {"host": host})) as cursor:
            restart_at, paused = cursor.fetchone()
        return (utc_now(), datetime.fromisoformat(restart_at) if restart_at else None,
                set(paused.split(",")) if paused else set())

    def request_restart(self, host: str, at: datetime | None = None) -> datetime:
        when = stamp(at) if at is not None else stamp(utc_now())
        self._write_one(REQUEST_RESTART, {"host": host, "at": when})
        return datetime.fromisoformat(when)

    def set_paused(self, queue: str, paused: bool) -> None:
        self._write_one(SET_PAUSED, {"queue": queue, "paused": 1 if paused else 0})

    # -- status and pruning -------------------------------------------------------------

    def running_processes(self) -> list[dict[str, Any]]:
        now = utc_now()
        processes = self._read_dicts(RUNNING_PROCESSES, {})
        for process in processes:
            for name in ("started_at", "heartbeat_at"):
                process[name] = datetime.fromisoformat(process[name])
            process["heartbeat_age_s"] = (now - process["heartbeat_at"]).total_seconds()
        return processes

    def status(self, done_window_seconds: float = 3600) -> StatusRows:
        now = utc_now()
        processes = self.running_processes()
        with closing(self._read(LIVE_COUNTS, {"now": stamp(now)})) as cursor:
            live: list[tuple[Any, ...]] = [
                (queue, status, due, count, (now - datetime.fromisoformat(oldest)).total_seconds())
                for queue, status, due, count, oldest in cursor.fetchall()]
        with closing(self._read(DONE_SINCE, {"since": _stamp_ago(done_window_seconds)})) as cursor:
            done = dict(cursor.fetchall())
        with closing(self._read(PAUSED_QUEUES)) as cursor:
            paused = {row[0] for row in cursor.fetchall()}
        return processes, live, done, paused

    def count_finished(self, status: JobStatus, older_than_seconds: float) -> int:
        params = {"status": JobStatus(status).value, "before": _stamp_ago(older_than_seconds)}
        with closing(self._read(COUNT_FINISHED, params)) as cursor:
            return int(cursor.fetchone()[0])

    def prune_finished(self, status: JobStatus, older_than_seconds: float,
                       batch: int = 1000) -> int:
        return self._write_one(PRUNE_FINISHED, {"status": JobStatus(status).value, "batch": batch,
                                                "before": _stamp_ago(older_than_seconds)})

    def prune_processes(self, older_than_seconds: float, batch: int = 1000) -> int:
        before = _stamp_ago(older_than_seconds)
        deleted = self._write_one(PRUNE_PROCESSES, {"batch": batch, "before": before})
        # The rollup (a few rows per supervisor, queue and type each minute) and
        # the buckets of the groups no job started in since (one per rate-limited
        # type and key), in batches.
        for statement in (PRUNE_MINUTES, PRUNE_LIMIT_GROUPS):
            while True:
                rows = self._write_one(statement, {"batch": batch, "before": before})
                deleted += rows
                if rows < batch:
                    break
        return deleted

    def discard_dead(self, job_ids: Sequence[int]) -> int:
        if not job_ids:
            return 0
        ids, params = placeholders("id", job_ids)
        return self._write_one(DISCARD_DEAD.format(ids=ids), params)


def _return_jobs_of(cursor: Any, process_id: int, spare: Callable[[HeldJob], bool]) -> int:
    """Return the jobs of a pruned supervisor but those spare() keeps; how many."""
    now = utc_now()
    held = [(job, member) for job, member in _held_jobs(cursor, process_id, now)
            if not spare(job)]
    if not held:
        return 0
    ids, params = placeholders("id", [job.job_id for job, _ in held])
    cursor.execute(RETURN_JOBS_OF.format(ids=ids), {**params, "id": process_id,
                                                    "now": stamp(now),
                                                    "error": SILENT_SUPERVISOR_ERROR})
    returned = int(cursor.rowcount)
    SQLiteFlows(cursor).settle_returned([job.job_id for job, member in held if member])
    return returned


def _held_jobs(cursor: Any, process_id: int, now: datetime) -> list[tuple[HeldJob, bool]]:
    """The jobs reserved under a supervisor's id, as spare() sees them, and whether
    each is a workflow's member."""
    return [(HeldJob(job_id, worker or "",
                     (now - datetime.fromisoformat(written)).total_seconds()), bool(member))
            for job_id, worker, written, member
            in cursor.execute(JOBS_OF, {"id": process_id}).fetchall()]


def _stamp_ago(seconds: float) -> str:
    """This host's UTC time `seconds` ago, as stored text."""
    return stamp(utc_now() - timedelta(seconds=seconds))
