"""The SQLite store: the embedded backend for one host. SQLiteStore puts together
its parts (session.py: the connection and its transactions; lifecycle.py: claims,
completions and leases; limits.py: the limits' rules and the limited claim;
cancel.py: cancellation; operations.py: the operator tables; dashboard.py: the
dashboard's reads and the per-minute rollup; results.py: every job's result and
failed attempts; file.py: the file,
its DSN and its time stamps), and holds the schema, the producing and the
inspection of jobs itself. Every statement is named in queries.py (or the
queries module of its part).

DSN: sqlite:///relative/path.db (relative to the working directory) or
sqlite:////absolute/path.db. Only an open with create=True (`run`, `migrate`)
creates a missing file, and only migrate() applies the schema (schema/sqlite/);
any other open of a missing file, or of one without the schema, refuses with
NoQueueDatabase.

How the store contract holds on SQLite:
- WAL journal: readers never block the writer, nor it them.
- SQLite has one writer at a time and no row locks, so every write is one
  BEGIN IMMEDIATE transaction: it takes the write lock before it reads, and a
  claim's read and its reservation cannot interleave with another writer's.
  A busy lock is retried every few milliseconds, with jitter, for up to
  lock_wait_timeout seconds; only then does the caller see "database is locked".
- Times come from this host's clock (there is no server) and are stored as
  fixed-width UTC text to the microsecond, so text order is time order.
  get() and dead_jobs() return naive UTC datetimes, as the MySQL store does.
- A connection never crosses a fork: a store opened before a fork must be
  abandon()ed in the child (which closes the parent's connection there, see
  session.py), before the child opens its own.
"""
import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

from ...config import Config
from ...errors import UserError
from ...jobs import JobStatus, NewJob, utc_now
from ...limits.rules import NO_KEY
from ..contract import JobRow, QueueFigures, packaged_migrations, queue_figures
from .file import (
    network_filesystem,
    parse_dsn,
    run_at_utc,
    split_statements,
    stamp,
    warn_once,
    where,
)
from .file import queue_schema_named as queue_schema_named  # for prefork.enqueue
from .cancel import SQLiteCancellation
from .cancel import cancel_on as cancel_on   # for prefork.cancel
from .dashboard import SQLiteDashboard
from .limits import SQLiteLimits
from .members import SQLiteMembers
from .operations import SQLiteOperations
from .results import SQLiteResults
from .queries import (
    COUNTS,
    CREATE_MIGRATIONS,
    DATABASE_FILE,
    DEAD_JOBS,
    ENQUEUE,
    EXISTING_JOB,
    FOREIGN_HOLDER,
    GET,
    HAS_MIGRATIONS_TABLE,
    QUEUE_STATS,
    RECORD_MIGRATION,
    RETRY_DEAD,
    RETRY_DEAD_IDS,
    SCHEMA_VERSIONS,
    placeholders,
)
from .wakeups import SQLiteWakeups
from .workflow_views import SQLiteWorkflowViews
from .workflows import SQLiteFlows


class SQLiteStore(SQLiteLimits, SQLiteCancellation, SQLiteOperations, SQLiteDashboard,
                  SQLiteWakeups, SQLiteResults, SQLiteMembers, SQLiteWorkflowViews):
    def __init__(self, config: Config, create: bool = False) -> None:
        self.path = parse_dsn(config.dsn)
        self.busy_seconds = float(config.lock_wait_timeout)
        fs_type = network_filesystem(self.path)
        if fs_type:
            warn_once(("network", self.path), "sqlite_on_network_filesystem", path=self.path,
                      fstype=fs_type, advice="SQLite locking is not reliable over a network "
                      "filesystem: use a local disk, or MySQL for more than one host")
        self.bell_key = _bell_key(self.path)
        self.owner_pid = os.getpid()
        self.named = where(config.dsn, self.path)
        self.conn = None
        self._open(create)
        if not create:   # a created or migrating file may have no jobs table yet
            self._warn_if_shared_with_other_hosts()

    def _warn_if_shared_with_other_hosts(self) -> None:
        holders = self._read_dicts(FOREIGN_HOLDER, {"prefix": os.uname().nodename + ":"})
        if holders:
            warn_once(("hosts", self.path), "sqlite_shared_by_hosts", path=self.path,
                      other_host=holders[0]["locked_by"].rsplit(":", 1)[0],
                      advice="a job here is held by a worker of another host; "
                      "SQLite serves one host only: use MySQL")

    # -- schema ---------------------------------------------------------------

    @staticmethod
    def _applied_versions(execute: Callable[[str], sqlite3.Cursor]) -> set[int]:
        """Versions recorded so far, read with `execute` (a cursor's, or _read)."""
        if execute(HAS_MIGRATIONS_TABLE).fetchone() is None:
            return set()
        return {row[0] for row in execute(SCHEMA_VERSIONS).fetchall()}


    def migrate(self) -> list[int]:
        # SQLite's DDL is transactional: the whole upgrade is one write
        # transaction, so processes opening a new file at once apply each
        # version exactly once.
        done_now = []
        with self._write() as cursor:
            cursor.execute(CREATE_MIGRATIONS)
            applied = self._applied_versions(cursor.execute)
            for version, name, sql in packaged_migrations("sqlite"):
                if version in applied:
                    continue
                for statement in split_statements(sql):
                    cursor.execute(statement)
                cursor.execute(RECORD_MIGRATION, {"version": version, "name": name,
                                                  "now": stamp(utc_now())})
                done_now.append(version)
        return done_now

    def check_schema(self) -> list[int]:
        applied = self._applied_versions(self._read)
        known = {version for version, _, _ in packaged_migrations("sqlite")}
        missing = sorted(known - applied)
        if missing:
            raise UserError(f"queue schema in {self.path} is behind (missing version "
                            f"{missing[0]}): run `prefork-queue migrate`")
        return sorted(applied - known)

    # -- producing --------------------------------------------------------------

    def enqueue(self, new_job: NewJob) -> int:
        with self._write() as cursor:
            job_id = enqueue_on(cursor, new_job)
        self.ring([new_job])
        return job_id

    def enqueue_many(self, new_jobs: Sequence[NewJob]) -> int:
        if not new_jobs:
            return 0
        with self._write() as cursor:
            now = utc_now()
            cursor.executemany(ENQUEUE, [_enqueue_params(job, now) for job in new_jobs])
            added = cursor.rowcount
        self.ring(new_jobs)
        return added

    # -- inspection and repair ----------------------------------------------------------

    def get(self, job_id: int) -> JobRow | None:
        rows = self._read_dicts(GET, {"id": job_id})
        return rows[0] if rows else None

    def dead_jobs(self, queue: str | None = None, limit: int = 100) -> list[JobRow]:
        return self._read_dicts(DEAD_JOBS, {"queue": queue, "limit": limit})

    def retry_dead(self, job_ids: Sequence[int] | None = None, queue: str | None = None,
                   max_attempts: int | None = None,
                   statuses: Sequence[JobStatus] = (JobStatus.DEAD,)) -> int:
        states = [JobStatus(status).value for status in statuses]
        names, chosen = placeholders("status", states)
        chosen.update(queue=queue, max_attempts=max_attempts)
        if job_ids is None:
            plain = self._write_one(RETRY_DEAD.format(statuses=names), chosen)
        elif not job_ids:
            return 0
        else:
            ids, params = placeholders("id", job_ids)
            plain = self._write_one(RETRY_DEAD_IDS.format(ids=ids, statuses=names),
                                    {**params, **chosen})
        return plain + self._retry_members(job_ids, queue, max_attempts, states)

    def counts(self) -> dict[str, int]:
        with closing(self._read(COUNTS)) as cursor:
            return {status: count for status, count in cursor.fetchall()}

    def queue_stats(self, queues: Sequence[str]) -> dict[str, QueueFigures]:
        if not queues:   # "IN ()": no queue, no figures
            return {}
        names, params = placeholders("queue", queues)
        with closing(self._read(QUEUE_STATS.format(queues=names),
                                {**params, "now": stamp(utc_now())})) as cursor:
            return queue_figures(queues, cursor.fetchall())


def _bell_key(path: str) -> str:
    # What names this database for same-host wake-ups: the real path, as
    # every way of naming the file leads to it.
    return f"sqlite/{os.path.realpath(path)}"


def bell_key_of(conn: sqlite3.Connection) -> str:
    """The bell key of the database file an application's sqlite3 connection uses."""
    return _bell_key(conn.execute(DATABASE_FILE).fetchone()[2])


def _enqueue_params(new_job: NewJob, now: datetime) -> dict[str, Any]:
    if new_job.run_at is not None:
        available_at = run_at_utc(new_job.run_at)
    else:
        available_at = now + timedelta(seconds=new_job.delay)
    return {"queue": new_job.queue, "job_type": new_job.type, "payload": new_job.payload_text,
            "key": new_job.key, "priority": new_job.priority,
            "max_attempts": new_job.max_attempts, "available_at": stamp(available_at),
            "concurrency_key": new_job.concurrency_key or NO_KEY, "now": stamp(now)}


def flows_on(cursor: sqlite3.Cursor) -> SQLiteFlows:
    """The workflow statements on the caller's cursor, inside the caller's transaction."""
    return SQLiteFlows(cursor)


def enqueue_on(cursor: sqlite3.Cursor, new_job: NewJob) -> int:
    """Insert on the caller's cursor, inside the caller's transaction; never commits.
    Returns the new job's id, or the existing one for a repeated queue and key."""
    params = _enqueue_params(new_job, utc_now())
    cursor.execute(ENQUEUE, params)
    if cursor.rowcount == 1 and cursor.lastrowid is not None:
        return cursor.lastrowid
    return int(cursor.execute(EXISTING_JOB, params).fetchone()[0])
