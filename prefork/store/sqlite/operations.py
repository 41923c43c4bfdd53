"""The SQLite store's operator tables: the supervisor registry, paused queues,
restart requests, status, pruning. A mixin of SQLiteStore; all its SQL is here.

Times are this host's UTC clock, as stored text (see sqlite.py).
"""
from contextlib import closing
from datetime import datetime

from ..contract import SILENT_SUPERVISOR_ERROR

REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, started_at,"
    " heartbeat_at) VALUES (:host, :pid, 'running', :queues, :workers, :version, :now, :now)")

HEARTBEAT = (
    "UPDATE prefork_processes SET heartbeat_at = :now, queues = :queues, workers = :workers,"
    " children = :children WHERE id = :id AND state = 'running'")

STOP = ("UPDATE prefork_processes SET state = 'stopped', children = NULL, heartbeat_at = :now"
        " WHERE id = :id AND state = 'running'")

SILENT = ("SELECT id FROM prefork_processes WHERE state = 'running' AND heartbeat_at < :since"
          " ORDER BY heartbeat_at LIMIT :limit")

MARK_PRUNED = ("UPDATE prefork_processes SET state = 'pruned', children = NULL"
               " WHERE id = :id AND state = 'running' AND heartbeat_at < :since")

RETURN_JOBS_OF = (
    "UPDATE prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'ready' END,"
    " last_error = :error, lease_token = NULL, lease_until = NULL, available_at = :now,"
    " finished_at = CASE WHEN attempts >= max_attempts THEN :now END, updated_at = :now"
    " WHERE status = 'reserved' AND process_id = :id")

CONTROL = (
    "SELECT (SELECT MAX(requested_at) FROM prefork_restarts WHERE host IN ('*', :host)),"
    " (SELECT group_concat(queue, ',') FROM prefork_queue_states WHERE paused = 1)")

REQUEST_RESTART = (
    "INSERT INTO prefork_restarts (host, requested_at) VALUES (:host, :at)"
    " ON CONFLICT (host) DO UPDATE SET requested_at = excluded.requested_at")

SET_PAUSED = (
    "INSERT INTO prefork_queue_states (queue, paused, updated_at) VALUES (:queue, :paused, :now)"
    " ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at"
    " FROM prefork_processes WHERE state = 'running' ORDER BY host, pid")

PAUSED_QUEUES = "SELECT queue FROM prefork_queue_states WHERE paused = 1 ORDER BY queue"

LIVE_COUNTS = (
    "SELECT queue, status, available_at <= :now AS due, COUNT(*), MIN(available_at)"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('ready', 'reserved', 'dead') GROUP BY queue, status, due")

DONE_SINCE = (
    "SELECT queue, COUNT(*) FROM prefork_jobs INDEXED BY ix_prefork_jobs_finished"
    " WHERE status = 'done' AND finished_at >= :since GROUP BY queue")

FINISHED_BEFORE = "status = :status AND finished_at < :before"

COUNT_FINISHED = f"SELECT COUNT(*) FROM prefork_jobs WHERE {FINISHED_BEFORE}"

PRUNE_FINISHED = (
    "DELETE FROM prefork_jobs WHERE id IN (SELECT id FROM prefork_jobs INDEXED BY"
    f" ix_prefork_jobs_finished WHERE {FINISHED_BEFORE} ORDER BY finished_at LIMIT :batch)")

PRUNE_PROCESSES = (
    "DELETE FROM prefork_processes WHERE id IN (SELECT id FROM prefork_processes"
    " WHERE state IN ('stopped', 'pruned') AND heartbeat_at < :before LIMIT :batch)")

DISCARD_DEAD = "DELETE FROM prefork_jobs WHERE status = 'dead' AND id IN ({ids})"


class SQLiteOperations:
    # -- the supervisor registry -----------------------------------------------

    def register_process(self, host, pid, queues, workers, version):
        with self._write() as cursor:
            cursor.execute(REGISTER, {"host": host, "pid": pid, "queues": ",".join(queues),
                                      "workers": workers, "version": version,
                                      "now": self._now_text()})
            return cursor.lastrowid

    def heartbeat(self, process_id, queues, workers, children_json):
        return self._write_one(HEARTBEAT, {"id": process_id, "queues": ",".join(queues),
                                           "workers": workers, "children": children_json}) == 1

    def stop_process(self, process_id):
        self._write_one(STOP, {"id": process_id})

    def prune_silent(self, silent_seconds, limit=10):
        pruned = []
        with self._write() as cursor:
            since = self._now_text(-silent_seconds)
            ids = [row[0] for row in cursor.execute(SILENT, {"since": since, "limit": limit})]
            for process_id in ids:
                cursor.execute(MARK_PRUNED, {"id": process_id, "since": since})
                if cursor.rowcount == 1:
                    cursor.execute(RETURN_JOBS_OF, {"id": process_id, "now": self._now_text(),
                                                    "error": SILENT_SUPERVISOR_ERROR})
                    pruned.append((process_id, cursor.rowcount))
        return pruned

    # -- control ---------------------------------------------------------------------

    def control_state(self, host):
        with closing(self._read(CONTROL, {"host": host})) as cursor:
            restart_at, paused = cursor.fetchone()
        return (self._now(), datetime.fromisoformat(restart_at) if restart_at else None,
                set(paused.split(",")) if paused else set())

    def request_restart(self, host, at=None):
        when = self._stamp(at) if at is not None else self._now_text()
        self._write_one(REQUEST_RESTART, {"host": host, "at": when})
        return datetime.fromisoformat(when)

    def set_paused(self, queue, paused):
        self._write_one(SET_PAUSED, {"queue": queue, "paused": 1 if paused else 0})

    # -- status and pruning -------------------------------------------------------------

    def status(self, done_window_seconds=3600):
        now = self._now()
        processes = self._read_dicts(RUNNING_PROCESSES, {})
        for process in processes:
            for name in ("started_at", "heartbeat_at"):
                process[name] = datetime.fromisoformat(process[name])
            process["heartbeat_age_s"] = (now - process["heartbeat_at"]).total_seconds()
        with closing(self._read(LIVE_COUNTS, {"now": self._stamp(now)})) as cursor:
            live = [(queue, status, due, count,
                     (now - datetime.fromisoformat(oldest)).total_seconds())
                    for queue, status, due, count, oldest in cursor.fetchall()]
        since = self._now_text(-done_window_seconds)
        with closing(self._read(DONE_SINCE, {"since": since})) as cursor:
            done = dict(cursor.fetchall())
        with closing(self._read(PAUSED_QUEUES)) as cursor:
            paused = {row[0] for row in cursor.fetchall()}
        return processes, live, done, paused

    def count_finished(self, status, older_than_seconds):
        params = {"status": status, "before": self._now_text(-older_than_seconds)}
        with closing(self._read(COUNT_FINISHED, params)) as cursor:
            return cursor.fetchone()[0]

    def prune_finished(self, status, older_than_seconds, batch=1000):
        return self._write_one(PRUNE_FINISHED, {"status": status, "batch": batch,
                                                "before": self._now_text(-older_than_seconds)})

    def prune_processes(self, older_than_seconds, batch=1000):
        return self._write_one(PRUNE_PROCESSES, {"batch": batch,
                                                 "before": self._now_text(-older_than_seconds)})

    def discard_dead(self, job_ids):
        if not job_ids:
            return 0
        params = {f"id{n}": job_id for n, job_id in enumerate(job_ids)}
        return self._write_one(DISCARD_DEAD.format(ids=", ".join(f":{name}" for name in params)),
                               params)
