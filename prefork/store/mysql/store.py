"""The MySQL 8 / MariaDB 10.6+ store, through PyMySQL: MySQLStore puts together its
parts (session.py: the connection; lifecycle.py: claims, completions and leases;
operations.py: the operator tables; schema.py: migrations; dashboard.py: the
dashboard's reads and the per-minute rollup; limits.py: concurrency and rate
limits; cancel.py: cancellation; strays.py: jobs a failover left reserved;
results.py: every job's result and failed attempts;
portable.py: what the mysql dialect does its own way), and holds the producing
and inspection of jobs itself. Every statement is named in queries.py (the mysql
dialect's own in portable_queries.py).

Every queue session runs at READ COMMITTED (no gap locks for SKIP LOCKED
scans), in UTC, with short lock waits so that a stuck lock fails a
statement in seconds instead of hanging a worker.
"""
from collections.abc import Sequence

import pymysql

from ...config import Config
from ...jobs import JobStatus, NewJob
from ..contract import JobRow, QueueFigures, queue_figures
from .bulk import enqueue_args, insert_chunks
from .cancel import MySQLCancel
from .cancel import cancel_on as cancel_on   # prefork.cancel()'s, beside enqueue_on
from .dashboard import MySQLDashboard
from .dsn import parse_dsn
from .lifecycle import MySQLLifeCycle
from .limits import MySQLLimits
from .operations import MySQLOperations
from .portable import MySQLPortable
from .results import MySQLResults
from .queries import (
    COUNTS,
    DEAD_JOBS,
    ENQUEUE,
    GET,
    QUEUE_STATS,
    RETRY_DEAD,
    RETRY_DEAD_IDS,
    placeholders,
)
from .schema import MySQLSchema
from .server import Flavor
from .strays import MySQLStrays
from .session import connect
from .wakeups import MySQLWakeups
from .workflow_views import MySQLWorkflowViews


class MySQLStore(MySQLLifeCycle, MySQLOperations, MySQLSchema, MySQLDashboard, MySQLLimits,
                 MySQLCancel, MySQLWakeups, MySQLStrays, MySQLResults, MySQLWorkflowViews):
    """The store in the dialect that the `dialect` setting and the server choose:
    this class speaks the mariadb dialect; a store that connects to speak the
    mysql dialect becomes a PortableMySQLStore."""

    def __init__(self, config: Config, inspecting: bool = False) -> None:
        self.dsn_args = parse_dsn(config.dsn)
        self.bell_key = bell_key(self.dsn_args["database"])
        self.config = config
        # From here on the arguments of the host reached (a DSN may name several).
        self.conn, self.server, self.dialect, self.dsn_args = connect(
            config, self.dsn_args, config.password(), inspecting)
        if self.dialect is Flavor.MYSQL:
            # The dialect is known only once connected (auto reads the server's
            # version from the handshake), so the class is chosen here, not by
            # every caller that opens a store.
            self.__class__ = PortableMySQLStore

    def close(self) -> None:
        try:
            self.conn.close()
        except pymysql.err.Error:
            pass

    def abandon(self) -> None:
        # Closing our copy of the socket's file descriptor leaves the parent's
        # session intact; conn.close() would send COM_QUIT on the shared socket.
        sock = getattr(self.conn, "_sock", None)
        if sock is not None:
            sock.close()

    # -- producing --------------------------------------------------------------

    def enqueue(self, new_job: NewJob) -> int:
        def insert() -> int:
            with self.conn.cursor() as cursor:
                return enqueue_on(cursor, new_job)
        # Autocommitted, hence safe to run again: on a cluster another node's
        # insert of the same key may win (session.py, NO_AUTOCOMMIT_RETRY).
        job_id = self._retry_contention(insert)
        self.ring([new_job])
        return job_id

    def enqueue_many(self, new_jobs: Sequence[NewJob]) -> int:
        if not new_jobs:
            return 0
        with self._transaction() as cursor:
            added = insert_chunks(cursor, new_jobs)
        self.ring(new_jobs)
        return added

    # -- inspection and repair --------------------------------------------------------

    def get(self, job_id: int) -> JobRow | None:
        rows = self._dicts(GET, (job_id,))
        return rows[0] if rows else None

    def dead_jobs(self, queue: str | None = None, limit: int = 100) -> list[JobRow]:
        return self._dicts(DEAD_JOBS, (queue, queue, limit))

    def retry_dead(self, job_ids: Sequence[int] | None = None, queue: str | None = None,
                   max_attempts: int | None = None,
                   statuses: Sequence[JobStatus] = (JobStatus.DEAD,)) -> int:
        states = [JobStatus(status).value for status in statuses]
        if not states or job_ids is not None and not job_ids:
            return 0
        listed = placeholders(len(states))
        if job_ids is None:
            plain = self._rowcount(RETRY_DEAD.format(statuses=listed),
                                   (max_attempts, *states, queue, queue))
        else:
            plain = self._rowcount(
                RETRY_DEAD_IDS.format(statuses=listed, ids=placeholders(len(job_ids))),
                (max_attempts, *states, queue, queue, *job_ids))
        return plain + self._retry_members(job_ids, queue, max_attempts, states)

    def counts(self) -> dict[str, int]:
        return {status: count for status, count in self._all(COUNTS)}

    def queue_stats(self, queues: Sequence[str]) -> dict[str, QueueFigures]:
        if not queues:   # "IN ()" is a syntax error
            return {}
        rows = self._all(QUEUE_STATS.format(queues=placeholders(len(queues))), list(queues))
        return queue_figures(queues, rows)


class PortableMySQLStore(MySQLPortable, MySQLStore):
    """The store in the mysql dialect (portable.py): only what the MySQL 8.0 and
    8.4 reference manuals document, so it runs on MariaDB 10.6+ as well."""


def enqueue_on(cursor: pymysql.cursors.Cursor, new_job: NewJob) -> int:
    """Insert on the caller's cursor, inside the caller's transaction; never commits."""
    cursor.execute(ENQUEUE, enqueue_args(new_job))
    return cursor.lastrowid


def bell_key(database: str | None) -> str:
    """What names this database for same-host wake-ups (drivers.py: an application's)."""
    return f"mysql/{database}"
