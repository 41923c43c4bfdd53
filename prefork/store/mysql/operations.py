"""The MySQL store's operator tables: the supervisor registry, paused queues,
restart requests, status, pruning. A mixin of MySQLStore; all its SQL is here.

Every time is the server's UTC_TIMESTAMP(6), so hosts with skewed clocks agree.
"""
import pymysql

from ..contract import SILENT_SUPERVISOR_ERROR
from .session import micros

REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, started_at,"
    " heartbeat_at) VALUES (%s, %s, 'running', %s, %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

# Only a running row beats: one that others pruned stays pruned, and its
# supervisor learns it from the row count.
HEARTBEAT = (
    "UPDATE prefork_processes SET heartbeat_at = UTC_TIMESTAMP(6), queues = %s, workers = %s,"
    " children = %s WHERE id = %s AND state = 'running'")

STOP = ("UPDATE prefork_processes SET state = 'stopped', children = NULL,"
        " heartbeat_at = UTC_TIMESTAMP(6) WHERE id = %s AND state = 'running'")

SILENT = ("SELECT id FROM prefork_processes WHERE state = 'running'"
          " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
          " ORDER BY heartbeat_at LIMIT %s")

# Whoever flips the row to 'pruned' hands back its jobs; the others see 0 rows.
MARK_PRUNED = ("UPDATE prefork_processes SET state = 'pruned', children = NULL"
               " WHERE id = %s AND state = 'running'"
               " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND")

# The vanished supervisor's jobs, as lease expiry would return them (the
# attempt was used), but now instead of when each lease runs out.
RETURN_JOBS_OF = (
    "UPDATE prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
    " SET status = IF(attempts >= max_attempts, 'dead', 'ready'), last_error = %s,"
    " lease_token = NULL, lease_until = NULL, available_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(attempts >= max_attempts, UTC_TIMESTAMP(6), NULL),"
    " updated_at = UTC_TIMESTAMP(6) WHERE status = 'reserved' AND process_id = %s")

# One round trip per poll: the server's clock, the newest restart request for
# this host, and the paused queues.
CONTROL = (
    "SELECT UTC_TIMESTAMP(6),"
    " (SELECT MAX(requested_at) FROM prefork_restarts WHERE host IN ('*', %s)),"
    " (SELECT GROUP_CONCAT(queue SEPARATOR ',') FROM prefork_queue_states WHERE paused = 1)")

REQUEST_RESTART = (
    "INSERT INTO prefork_restarts (host, requested_at)"
    " VALUES (%s, COALESCE(%s, UTC_TIMESTAMP(6)))"
    " ON DUPLICATE KEY UPDATE requested_at = VALUES(requested_at)")

RESTART_REQUESTED = "SELECT requested_at FROM prefork_restarts WHERE host = %s"

SET_PAUSED = (
    "INSERT INTO prefork_queue_states (queue, paused, updated_at)"
    " VALUES (%s, %s, UTC_TIMESTAMP(6))"
    " ON DUPLICATE KEY UPDATE paused = VALUES(paused), updated_at = VALUES(updated_at)")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at,"
    " TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) / 1e6 AS heartbeat_age_s"
    " FROM prefork_processes FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running' ORDER BY host, pid")

PAUSED_QUEUES = "SELECT queue FROM prefork_queue_states WHERE paused = 1 ORDER BY queue"

# Per queue, only the live statuses (the claim index starts with status, so
# the millions of done rows are never read), split into due and delayed.
LIVE_COUNTS = (
    "SELECT queue, status, available_at <= UTC_TIMESTAMP(6) AS due, COUNT(*),"
    " TIMESTAMPDIFF(MICROSECOND, MIN(available_at), UTC_TIMESTAMP(6)) / 1e6"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved', 'dead') GROUP BY queue, status, due")

DONE_SINCE = (
    "SELECT queue, COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_finished)"
    " WHERE status = 'done' AND finished_at >= UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
    " GROUP BY queue")

FINISHED_BEFORE = ("status = %s AND finished_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND")

COUNT_FINISHED = f"SELECT COUNT(*) FROM prefork_jobs WHERE {FINISHED_BEFORE}"

# Oldest first through the finished index, a bounded batch per statement so
# that no delete holds locks for long.
PRUNE_FINISHED = (f"DELETE FROM prefork_jobs WHERE {FINISHED_BEFORE}"
                  " ORDER BY finished_at LIMIT %s")

PRUNE_PROCESSES = (
    "DELETE FROM prefork_processes WHERE state IN ('stopped', 'pruned')"
    " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND LIMIT %s")

DISCARD_DEAD = "DELETE FROM prefork_jobs WHERE status = 'dead' AND id IN ({ids})"


class MySQLOperations:
    # -- the supervisor registry -----------------------------------------------

    def register_process(self, host, pid, queues, workers, version):
        with self.conn.cursor() as cursor:
            cursor.execute(REGISTER, (host, pid, ",".join(queues), workers, version))
            return cursor.lastrowid

    def heartbeat(self, process_id, queues, workers, children_json):
        return self._rowcount(HEARTBEAT, (",".join(queues), workers, children_json,
                                          process_id)) == 1

    def stop_process(self, process_id):
        self._rowcount(STOP, (process_id,))

    def prune_silent(self, silent_seconds, limit=10):
        pruned = []
        for (process_id,) in self._all(SILENT, (micros(silent_seconds), limit)):
            returned = self._retry_contention(
                lambda: self._prune_one(process_id, silent_seconds))
            if returned is not None:
                pruned.append((process_id, returned))
        return pruned

    def _prune_one(self, process_id, silent_seconds):
        with self._transaction() as cursor:
            if cursor.execute(MARK_PRUNED, (process_id, micros(silent_seconds))) != 1:
                return None   # it beat again, or another supervisor got there first
            return cursor.execute(RETURN_JOBS_OF, (SILENT_SUPERVISOR_ERROR, process_id))

    # -- control ---------------------------------------------------------------------

    def control_state(self, host):
        now, restart_at, paused = self._one(CONTROL, (host,))
        return now, restart_at, set(paused.split(",")) if paused else set()

    def request_restart(self, host, at=None):
        self._rowcount(REQUEST_RESTART, (host, at))
        return self._one(RESTART_REQUESTED, (host,))[0]

    def set_paused(self, queue, paused):
        self._rowcount(SET_PAUSED, (queue, 1 if paused else 0))

    # -- status and pruning -------------------------------------------------------------

    def status(self, done_window_seconds=3600):
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(RUNNING_PROCESSES)
            processes = cursor.fetchall()
        live = self._all(LIVE_COUNTS)
        done = dict(self._all(DONE_SINCE, (micros(done_window_seconds),)))
        paused = {row[0] for row in self._all(PAUSED_QUEUES)}
        return processes, live, done, paused

    def count_finished(self, status, older_than_seconds):
        return self._one(COUNT_FINISHED, (status, micros(older_than_seconds)))[0]

    def prune_finished(self, status, older_than_seconds, batch=1000):
        return self._rowcount(PRUNE_FINISHED, (status, micros(older_than_seconds), batch))

    def prune_processes(self, older_than_seconds, batch=1000):
        return self._rowcount(PRUNE_PROCESSES, (micros(older_than_seconds), batch))

    def discard_dead(self, job_ids):
        if not job_ids:
            return 0
        return self._rowcount(DISCARD_DEAD.format(ids=", ".join(["%s"] * len(job_ids))),
                              list(job_ids))

    def _all(self, sql, args=None):
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
