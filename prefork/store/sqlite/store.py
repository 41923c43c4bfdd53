"""The SQLite store: the embedded backend for one host. All of its SQL lives here
(the file and its connection: sqlite_file.py; the operator tables: sqlite_ops.py).

DSN: sqlite:///relative/path.db (relative to the working directory) or
sqlite:////absolute/path.db. The first open creates the file and applies the
schema (schema/sqlite/).

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
  abandon()ed in the child, which then opens its own.
"""
import os
import secrets
from contextlib import closing, contextmanager
from datetime import timedelta

from ...errors import LeaseLost, UserError
from ...retry import hand_back_decision
from ..contract import CLAIMED_COLUMNS, Store, claimed_job, packaged_migrations, queue_figures
from .file import (
    _connect,
    _execute_when_free,
    _run_at_utc,
    _stamp,
    _statements,
    _times,
    _utc_now,
    _warn_once,
    decode_times,
    network_filesystem,
    parse_dsn,
)
from .operations import SQLiteOperations

# Connections inherited over a fork and abandoned: kept referenced so that
# they are never finalized (closed) in a process that did not open them.
_ABANDONED = []

# --- named queries -----------------------------------------------------------

# Insert one job; a repeated (queue, key) inserts nothing (rowcount 0), and
# EXISTING_JOB then finds the job that holds the key.
ENQUEUE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at)"
    " VALUES (:queue, :job_type, :payload, :key, :priority, :max_attempts, :available_at,"
    " :now, :now)"
    " ON CONFLICT (queue, idempotency_key) DO NOTHING")

EXISTING_JOB = "SELECT id FROM prefork_jobs WHERE queue = :queue AND idempotency_key = :key"

# A paused queue is claimed by nobody.
UNPAUSED = (" AND NOT EXISTS (SELECT 1 FROM prefork_queue_states"
            " WHERE queue = :queue AND paused = 1)")

# The next ready jobs of one queue in index order. INDEXED BY: the statement
# fails rather than run with another plan. No SKIP LOCKED: the claimer holds
# the database's write lock, so nobody else can reserve these rows meanwhile.
CLAIM_SELECT = (
    f"SELECT {CLAIMED_COLUMNS} FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND available_at <= :now" + UNPAUSED +
    " ORDER BY priority, available_at, id LIMIT :limit")

# How many jobs of one queue are ready, counting at most :limit, from the
# claim index (a read: no lock taken).
READY_COUNT = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND available_at <= :now" + UNPAUSED +
    " LIMIT :limit)")

CLAIM_RESERVE = (
    "UPDATE prefork_jobs SET status = 'reserved', attempts = attempts + 1, lease_token = :token,"
    " lease_until = :lease_until, locked_by = :worker, process_id = :process_id,"
    " updated_at = :now WHERE id = :id")

# The fence shared by complete, fail and extend: our token, still reserved,
# lease not yet over. Zero rows matched means the lease was lost.
LEASE_FENCE = "id = :id AND status = 'reserved' AND lease_token = :token AND lease_until > :now"

# The token stays on a done row: it tells whoever completes a group of jobs
# that one of them was already written with that same lease (by the parent,
# for a child busy with a slow job).
COMPLETE = (
    "UPDATE prefork_jobs SET status = 'done', lease_until = NULL,"
    " finished_at = :now, updated_at = :now WHERE " + LEASE_FENCE)

HOLDS_LEASE = f"SELECT 1 FROM prefork_jobs WHERE {LEASE_FENCE}"

DONE_WITH_TOKEN = "SELECT 1 FROM prefork_jobs WHERE id = :id AND status = 'done' AND lease_token = :token"

FAIL = (
    "UPDATE prefork_jobs SET status = :status, last_error = :error, lease_token = NULL,"
    " lease_until = NULL, available_at = :available_at,"
    " finished_at = CASE WHEN :status = 'dead' THEN :now END, updated_at = :now"
    " WHERE " + LEASE_FENCE)

# Release needs no live lease: giving back an unstarted claim is always
# safe while the token still matches (nobody else took the job).
RELEASE = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = attempts - 1, lease_token = NULL,"
    " lease_until = NULL, locked_by = NULL, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token")

EXTEND = "UPDATE prefork_jobs SET lease_until = :lease_until, updated_at = :now WHERE " + LEASE_FENCE

# The dead worker's job, by its token (no lease check: the token proves
# nobody else took it).
HELD_BY_TOKEN = ("SELECT attempts, max_attempts, crashes FROM prefork_jobs"
                 " WHERE id = :id AND status = 'reserved' AND lease_token = :token")

HAND_BACK = (
    "UPDATE prefork_jobs SET status = :status, attempts = attempts - :restored,"
    " crashes = crashes + :crashed, last_error = :error, lease_token = NULL, lease_until = NULL,"
    " available_at = :available_at, finished_at = CASE WHEN :status = 'dead' THEN :now END,"
    " updated_at = :now WHERE id = :id")

# Expired leases, oldest first, reading the lease index.
EXPIRED_SELECT = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " WHERE status = 'reserved' AND lease_until <= :now ORDER BY lease_until LIMIT :limit")

RECOVER = (
    "UPDATE prefork_jobs SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'ready' END,"
    " last_error = 'lease expired', lease_token = NULL, lease_until = NULL, available_at = :now,"
    " updated_at = :now, finished_at = CASE WHEN attempts >= max_attempts THEN :now END"
    f" WHERE id IN ({EXPIRED_SELECT})")

GET = (
    "SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts,"
    " max_attempts, crashes, available_at, lease_until, locked_by, last_error, created_at,"
    " updated_at, finished_at FROM prefork_jobs WHERE id = :id")

DEAD = (
    "SELECT id, queue, job_type, attempts, last_error, finished_at FROM prefork_jobs"
    " WHERE status = 'dead' {queue_filter} ORDER BY finished_at DESC, id DESC LIMIT :limit")

RETRY_DEAD = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = :now, updated_at = :now"
    " WHERE status = 'dead' {filters}")

COUNTS = "SELECT status, COUNT(*) FROM prefork_jobs {queue_filter} GROUP BY status"

# Depth of some queues for the metrics: only the claim index's ranges of the
# live statuses (its first column), so the millions of done rows are never read.
QUEUE_STATS = (
    "SELECT queue, status, COUNT(*), SUM(available_at <= :now),"
    " (julianday(:now) - julianday(MIN(CASE WHEN available_at <= :now THEN available_at END)))"
    " * 86400.0"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('ready', 'reserved', 'dead') AND queue IN ({queues})"
    " GROUP BY queue, status")

# A job held by a worker whose host name is not ours: the file is shared
# beyond this machine (locked_by is "host:pid").
FOREIGN_HOLDER = (
    "SELECT locked_by FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " WHERE status = 'reserved' AND substr(locked_by, 1, length(:prefix)) <> :prefix LIMIT 1")

HAS_MIGRATIONS_TABLE = ("SELECT 1 FROM sqlite_master"
                        " WHERE type = 'table' AND name = 'prefork_schema_migrations'")

SCHEMA_VERSIONS = "SELECT version FROM prefork_schema_migrations"

CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS prefork_schema_migrations ("
    " version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")

RECORD_MIGRATION = ("INSERT INTO prefork_schema_migrations (version, name, applied_at)"
                    " VALUES (:version, :name, :now)")


class SQLiteStore(SQLiteOperations, Store):
    def __init__(self, config):
        self.path = parse_dsn(config.dsn)
        self.busy_seconds = float(config.lock_wait_timeout)
        fs_type = network_filesystem(self.path)
        if fs_type:
            _warn_once(("network", self.path), "sqlite_on_network_filesystem", path=self.path,
                       fstype=fs_type, advice="SQLite locking is not reliable over a network "
                       "filesystem: use a local disk, or MySQL for more than one host")
        self.bell_key = _bell_key(self.path)
        self.owner_pid = os.getpid()
        self.conn = _connect(self.path, self.busy_seconds)
        if self._missing_versions():
            self.migrate()
        self._warn_if_shared_with_other_hosts()

    # The clock, for the operator tables (sqlite_ops.py).
    _stamp = staticmethod(_stamp)

    @staticmethod
    def _now():
        return _utc_now()

    def _now_text(self, offset_seconds=0.0):
        return _stamp(_utc_now() + timedelta(seconds=offset_seconds))

    def _connection(self):
        if self.conn is None or os.getpid() != self.owner_pid:
            raise RuntimeError(f"SQLite store for {self.path} used outside the process that "
                               "opened it (or after close): open one store per process")
        return self.conn

    def close(self):
        if os.getpid() != self.owner_pid:
            self.abandon()
        elif self.conn is not None:
            self.conn.close()
            self.conn = None

    def abandon(self):
        if self.conn is not None:
            _ABANDONED.append(self.conn)
            self.conn = None

    @contextmanager
    def _write(self):
        """One write transaction holding the database's write lock from its first read."""
        conn = self._connection()
        _execute_when_free(conn, "BEGIN IMMEDIATE", (), self.busy_seconds)
        try:
            with closing(conn.cursor()) as cursor:
                yield cursor
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _write_one(self, sql, params, **offsets):
        """One statement in its own write transaction; returns its row count.

        The times (now, and now + each offset in seconds) are read once the
        lock is held, so time spent waiting for the lock never shortens a
        lease or lets an expired one through the fence.
        """
        with self._write() as cursor:
            cursor.execute(sql, {**params, **_times(_utc_now(), **offsets)})
            return cursor.rowcount

    def _read(self, sql, params=()):
        """A cursor over a read. WAL readers are rarely kept waiting (while a
        crashed writer's WAL is recovered); they get the same bound as writers."""
        return _execute_when_free(self._connection(), sql, params, self.busy_seconds)

    def _read_dicts(self, sql, params):
        with closing(self._read(sql, params)) as cursor:
            names = [column[0] for column in cursor.description]
            return [decode_times(dict(zip(names, row))) for row in cursor.fetchall()]

    def _warn_if_shared_with_other_hosts(self):
        holders = self._read_dicts(FOREIGN_HOLDER, {"prefix": os.uname().nodename + ":"})
        if holders:
            _warn_once(("hosts", self.path), "sqlite_shared_by_hosts", path=self.path,
                       other_host=holders[0]["locked_by"].rsplit(":", 1)[0],
                       advice="a job here is held by a worker of another host; "
                       "SQLite serves one host only: use MySQL")

    # -- schema ---------------------------------------------------------------

    @staticmethod
    def _applied_versions(execute):
        """Versions recorded so far, read with `execute` (a cursor's, or _read)."""
        if execute(HAS_MIGRATIONS_TABLE).fetchone() is None:
            return set()
        return {row[0] for row in execute(SCHEMA_VERSIONS).fetchall()}

    def _missing_versions(self):
        applied = self._applied_versions(self._read)
        return [version for version, _, _ in packaged_migrations("sqlite") if version not in applied]

    def migrate(self):
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
                for statement in _statements(sql):
                    cursor.execute(statement)
                cursor.execute(RECORD_MIGRATION, {"version": version, "name": name,
                                                  "now": _stamp(_utc_now())})
                done_now.append(version)
        return done_now

    def check_schema(self):
        missing = self._missing_versions()
        if missing:
            raise UserError(f"queue schema in {self.path} is behind (missing version "
                            f"{missing[0]}): run `prefork-queue migrate`")

    # -- producing --------------------------------------------------------------

    def enqueue(self, new_job):
        with self._write() as cursor:
            job_id = enqueue_on(cursor, new_job)
        self.ring([new_job])
        return job_id

    def enqueue_many(self, new_jobs):
        if not new_jobs:
            return 0
        with self._write() as cursor:
            now = _utc_now()
            cursor.executemany(ENQUEUE, [_enqueue_params(job, now) for job in new_jobs])
            added = cursor.rowcount
        self.ring(new_jobs)
        return added

    # -- life cycle ---------------------------------------------------------------

    def claim(self, queues, worker, lease_seconds, limit=1, process_id=None):
        with self._write() as cursor:
            times = _times(_utc_now(), lease_until=lease_seconds)
            return self._reserve(cursor, queues, (worker, process_id), limit, times)

    def complete_and_claim(self, leases, queues, worker, lease_seconds, process_id=None, limit=1):
        # One lock and one commit instead of several: on SQLite the commit is the cost.
        with self._write() as cursor:
            times = _times(_utc_now(), lease_until=lease_seconds)
            completed = _complete_leases(cursor, leases, times)
            next_jobs = self._reserve(cursor, queues, (worker, process_id), limit, times)
        return completed, next_jobs

    def complete_many(self, leases):
        if not leases:
            return set()
        with self._write() as cursor:
            return _complete_leases(cursor, leases, _times(_utc_now()))

    def _reserve(self, cursor, queues, claimant, limit, times):
        """Claim up to `limit` ready jobs inside the caller's write transaction;
        claimant is (worker, supervisor process id or None)."""
        worker, process_id = claimant
        rows = _ready_rows(cursor, queues, limit, times["now"])
        tokens = [secrets.token_hex(16) for _ in rows]
        cursor.executemany(CLAIM_RESERVE, [{**times, "token": token, "worker": worker,
                                            "process_id": process_id, "id": row[0]}
                                           for row, token in zip(rows, tokens)])
        return [claimed_job(row, token, self) for row, token in zip(rows, tokens)]

    def ready_count(self, queues, limit):
        now = _stamp(_utc_now())
        return sum(self._read(READY_COUNT, {"queue": queue, "now": now, "limit": limit}).fetchone()[0]
                   for queue in queues)

    @contextmanager
    def completing(self, job):
        with self._write() as cursor:
            cursor.execute(HOLDS_LEASE, {**_lease(job), **_times(_utc_now())})
            if cursor.fetchone() is None:
                raise LeaseLost(f"job {job.id}: lease lost before completion")
            yield cursor
            # Fenced again: the lease may have run out while the effect was written.
            cursor.execute(COMPLETE, {**_lease(job), **_times(_utc_now())})
            if cursor.rowcount != 1:
                raise LeaseLost(f"job {job.id}: lease lost during completion")
        job.finished = True

    def fail(self, job, error, decision):
        status = "dead" if decision.dead else "ready"
        params = {**_lease(job), "status": status, "error": error[:500]}
        return self._write_one(FAIL, params, available_at=decision.delay) == 1

    def release(self, job):
        return self._write_one(RELEASE, _lease(job)) == 1

    def extend(self, job, lease_seconds):
        return self._write_one(EXTEND, _lease(job), lease_until=lease_seconds) == 1

    def extend_many(self, leases, lease_seconds):
        if not leases:
            return 0
        # One transaction of many small updates: on SQLite the cost is the
        # lock and the commit, not the number of statements.
        with self._write() as cursor:
            times = _times(_utc_now(), lease_until=lease_seconds)
            cursor.executemany(EXTEND, [{**times, "id": job_id, "token": token}
                                        for job_id, token in leases])
            extended = cursor.rowcount
            if extended == len(leases):
                return extended
            return extended + sum(
                cursor.execute(DONE_WITH_TOKEN, {"id": job_id, "token": token}).fetchone() is not None
                for job_id, token in leases)

    def hand_back(self, job_id, lease_token, cause, policy, max_crashes, charge=True):
        with self._write() as cursor:
            held = cursor.execute(HELD_BY_TOKEN, {"id": job_id, "token": lease_token}).fetchone()
            if held is None:
                return None
            status, delay, error = hand_back_decision(*held, cause, policy, max_crashes, charge)
            cursor.execute(HAND_BACK, {
                "id": job_id, "status": status, "restored": 0 if charge else 1,
                "crashed": 1 if charge else 0, "error": error[:500],
                **_times(_utc_now(), available_at=delay)})
            return status

    def recover_expired(self, limit=100):
        return self._write_one(RECOVER, {"limit": limit})

    # -- inspection -----------------------------------------------------------------

    def get(self, job_id):
        rows = self._read_dicts(GET, {"id": job_id})
        return rows[0] if rows else None

    def dead_jobs(self, queue=None, limit=100):
        queue_filter = "AND queue = :queue" if queue else ""
        return self._read_dicts(DEAD.format(queue_filter=queue_filter),
                                {"queue": queue, "limit": limit})

    def retry_dead(self, job_ids=None, queue=None):
        filters, params = [], {"queue": queue}
        if job_ids is not None:
            if not job_ids:
                return 0
            names = [f"id_{index}" for index in range(len(job_ids))]
            filters.append("AND id IN (" + ", ".join(":" + name for name in names) + ")")
            params.update(zip(names, job_ids))
        if queue:
            filters.append("AND queue = :queue")
        return self._write_one(RETRY_DEAD.format(filters=" ".join(filters)), params)

    def counts(self, queue=None):
        queue_filter = "WHERE queue = :queue" if queue else ""
        with closing(self._read(COUNTS.format(queue_filter=queue_filter),
                                {"queue": queue})) as cursor:
            return {status: count for status, count in cursor.fetchall()}

    def queue_stats(self, queues):
        names = {f"queue_{index}": queue for index, queue in enumerate(queues)}
        sql = QUEUE_STATS.format(queues=", ".join(":" + name for name in names))
        with closing(self._read(sql, {**names, "now": _stamp(_utc_now())})) as cursor:
            return queue_figures(queues, cursor.fetchall())


def _lease(job):
    return {"id": job.id, "token": job.lease_token}


def _bell_key(path):
    # What names this database for same-host wake-ups: the real path, as
    # every way of naming the file leads to it.
    return f"sqlite/{os.path.realpath(path)}"


def bell_key_of(conn):
    """The bell key of the database file an application's sqlite3 connection uses."""
    return _bell_key(conn.execute("PRAGMA database_list").fetchone()[2])


def _complete_leases(cursor, leases, times):
    """Complete each leased job inside the caller's write transaction; the ids
    completed, now or already with the same lease."""
    completed = set()
    for job_id, token in leases:
        lease = {"id": job_id, "token": token}
        cursor.execute(COMPLETE, {**lease, **times})
        if cursor.rowcount == 1 or cursor.execute(DONE_WITH_TOKEN, lease).fetchone():
            completed.add(job_id)
    return completed


def _ready_rows(cursor, queues, limit, now):
    """Up to `limit` ready rows, trying the queues in order (the caller holds the write lock)."""
    rows = []
    for queue in queues:
        if len(rows) >= limit:
            break
        cursor.execute(CLAIM_SELECT, {"queue": queue, "now": now, "limit": limit - len(rows)})
        rows.extend(cursor.fetchall())
    return rows


def _enqueue_params(new_job, now):
    if new_job.run_at is not None:
        available_at = _run_at_utc(new_job.run_at)
    else:
        available_at = now + timedelta(seconds=new_job.delay)
    return {"queue": new_job.queue, "job_type": new_job.type, "payload": new_job.payload_text,
            "key": new_job.key, "priority": new_job.priority,
            "max_attempts": new_job.max_attempts, "available_at": _stamp(available_at),
            "now": _stamp(now)}


def enqueue_on(cursor, new_job):
    """Insert on the caller's cursor, inside the caller's transaction; never commits.
    Returns the new job's id, or the existing one for a repeated queue and key."""
    params = _enqueue_params(new_job, _utc_now())
    cursor.execute(ENQUEUE, params)
    if cursor.rowcount == 1:
        return cursor.lastrowid
    return cursor.execute(EXISTING_JOB, params).fetchone()[0]

