"""The MySQL side of `prefork-queue bench`: the textbook loop it compares the
supervisor with (run in the same number of processes on the same jobs), and the
reads, counters and deletes of its scratch queues. The bench is an admin tool:
it deletes its own scratch rows, which the worker account of `prefork-queue
grants` may not (no DELETE)."""
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta

import pymysql

from ...config import Config
from ...jobs import NewJob, utc_now
from .bench_peers import PEERS_DATABASE as PEERS_DATABASE   # the bench reads them here
from .bench_peers import bench_peers_database as bench_peers_database
from .queries import placeholders
from .session import DEADLOCK_CODES, error_code, micros
from .store import MySQLStore

# The textbook claim, one job per transaction: BEGIN; this SELECT; TEXTBOOK_RESERVE;
# COMMIT. It reads the same index as ours, in order, so the comparison is about the
# loop: limited = 0 is an equality of the claim index (without it, a filesort).
TEXTBOOK_CLAIM_SELECT = (
    "SELECT id, payload FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " ORDER BY priority, available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED")

# Its statements on one job go by the primary key, as ours do: left to itself,
# the optimizer may take the lease index on a big table, and deadlock.
TEXTBOOK_RESERVE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'reserved', attempts = attempts + 1, lease_token = %s,"
    " lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, locked_by = %s,"
    " updated_at = UTC_TIMESTAMP(6) WHERE id = %s")

# The textbook completion, its own transaction: BEGIN; this; COMMIT. Fenced by the token.
TEXTBOOK_COMPLETE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_token = NULL, lease_until = NULL,"
    " finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s")

# The ceiling: what the store itself does with no supervisor, one process per
# worker, each transaction completing the batch it ran and claiming the next:
# BEGIN; CEILING_COMPLETE (the ids held, their token); CEILING_CLAIM_SELECT
# (queue, batch size); CEILING_RESERVE (token, lease, worker, the ids); COMMIT.
# Plain statements, one round trip each, the same index and fences as ours.
CEILING_CLAIM_SELECT = (
    "SELECT id, payload FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND limited = 0"
    " AND available_at <= UTC_TIMESTAMP(6)"
    " ORDER BY priority, available_at, id LIMIT %s FOR UPDATE SKIP LOCKED")

# One token for the whole batch ({ids}: a placeholder per id): the ceiling's
# jobs are its own, nobody else completes them.
CEILING_RESERVE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'reserved', attempts = attempts + 1,"
    " lease_token = %s, lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, locked_by = %s,"
    " updated_at = UTC_TIMESTAMP(6) WHERE id IN ({ids})")

CEILING_COMPLETE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_token = NULL,"
    " lease_until = NULL, finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)"
    " WHERE id IN ({ids}) AND status = 'reserved' AND lease_token = %s")

# Jobs of a queue not yet finished, read from the claim index (it shrinks as they finish).
BENCH_UNFINISHED = (
    "SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved') AND queue = %s")

# The jobs of a queue not yet finished whose time has come (queue, priority): with
# one priority the claim index reads available_at as a range, so the count never
# walks the delayed jobs of the delayed scenario (all at that priority, due later).
BENCH_UNFINISHED_DUE = (
    "SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved') AND queue = %s AND limited = 0 AND priority = %s"
    " AND available_at <= UTC_TIMESTAMP(6)")

# Done jobs of one queue, from the claim index (the backlog scenario's count of
# what its workers finished: a range that grows only by what they did).
BENCH_DONE = (
    "SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'done' AND queue = %s")

# The bare multi-row INSERT of the bulk-enqueue scenario (and of the delayed
# scenario's backlog): VALUES of bare placeholders, so PyMySQL's executemany sends
# as many rows per statement as fit its max_stmt_length; times computed here.
BENCH_BARE_INSERT = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, priority, max_attempts, available_at,"
    " created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")

# The effects scenario's table: each bench.effect job writes one row inside
# job.transaction(); the reference commits one row per transaction. The bench
# creates it and drops it afterwards (an admin tool).
BENCH_CREATE_EFFECTS = (
    "CREATE TABLE IF NOT EXISTS prefork_bench_effects ("
    " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
    " job_id BIGINT UNSIGNED NOT NULL) ENGINE = InnoDB")
BENCH_DROP_EFFECTS = "DROP TABLE IF EXISTS prefork_bench_effects"
BENCH_EFFECT_INSERT = "INSERT INTO prefork_bench_effects (job_id) VALUES (%s)"
BENCH_EFFECTS_WRITTEN = "SELECT COALESCE(MAX(id), 0) FROM prefork_bench_effects"

# Scratch rows go in chunks, so no statement holds a million row locks.
BENCH_DELETE_QUEUE = "DELETE FROM prefork_jobs WHERE queue = %s LIMIT %s"

# The most reserved jobs of one limit group (type, concurrency key) in a queue now, 0
# when none: the limit scenarios' check that a slot (a reserved job) is never taken
# twice. Reserved rows are few (bounded by the workers' batches).
BENCH_MOST_RESERVED_PER_GROUP = (
    "SELECT COALESCE(MAX(reserved), 0) FROM (SELECT COUNT(*) AS reserved"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'reserved' AND queue = %s GROUP BY job_type, concurrency_key) AS per_group")

# How many of a queue's done jobs were enqueued as limited (a rule for their type was
# published): the limit scenarios' check that their limited run was one.
BENCH_LIMITED_DONE = (
    "SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'done' AND queue = %s AND limited = 1")

# What the limit scenarios leave besides their jobs: the rules their supervisor
# published for the bench's two limited types (parameters: the types), and the
# groups' buckets, whose concurrency keys all start with the scratch queue's name
# (parameters: the types, the LIKE pattern "<queue>%").
BENCH_DELETE_LIMITS = "DELETE FROM prefork_limits WHERE job_type IN (%s, %s)"
BENCH_DELETE_LIMIT_GROUPS = ("DELETE FROM prefork_limit_groups"
                             " WHERE job_type IN (%s, %s) AND concurrency_key LIKE %s")

# Server counters, server-wide and of this connection alone (to subtract the
# bench's own), of the names BENCH_COUNTER_NAMES (the parameters).
# Handler_read_next: index entries read in order (a range scan's rows);
# Innodb_buffer_pool_reads: pages read from disk (not found in the buffer pool).
BENCH_COUNTER_NAMES = ("Questions", "Com_commit", "Handler_commit", "Innodb_log_writes",
                       "Handler_read_next", "Innodb_buffer_pool_reads")
BENCH_GLOBAL_COUNTERS = "SHOW GLOBAL STATUS WHERE Variable_name IN (%s, %s, %s, %s, %s, %s)"
BENCH_SESSION_COUNTERS = "SHOW SESSION STATUS WHERE Variable_name IN (%s, %s, %s, %s, %s, %s)"

# A big table of finished jobs, made fast: one done row, then copies of itself.
BENCH_SEED_DONE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, status, attempts, available_at,"
    " created_at, updated_at, finished_at) VALUES (%s, %s, %s, 'done', 1, UTC_TIMESTAMP(6),"
    " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

BENCH_DOUBLE_DONE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, status, attempts, available_at,"
    " created_at, updated_at, finished_at) SELECT queue, job_type, payload, status, attempts,"
    " available_at, created_at, updated_at, finished_at FROM prefork_jobs"
    " WHERE queue = %s AND status = 'done' LIMIT %s")

TEXTBOOK_IDLE_SLEEP = 0.25      # seconds between polls of an empty queue
# The ceiling polls an empty queue often: it stands for the best the store can do,
# so it must not lose a poll's wait at the start of a run.
CEILING_IDLE_SLEEP = 0.01
TEXTBOOK_LEASE_SECONDS = 60.0
BENCH_DELETE_CHUNK = 10_000


def textbook_loop(config: Config, queue: str, stop_when_empty: bool = False,
                  should_stop: Callable[[], bool] | None = None,
                  on_ready: Callable[[], None] | None = None) -> int:
    """The baseline of `prefork-queue bench`: claim one job per transaction, run the
    no-op (decode its payload), complete it in a second transaction; sleep 250 ms
    when the queue is empty. Opens its own connection (call it after a fork), with
    our session settings. Returns how many jobs it completed."""
    store = MySQLStore(config)
    worker = f"{os.uname().nodename}:{os.getpid()}"
    should_stop = should_stop or (lambda: False)
    if on_ready:
        on_ready()
    completed = 0
    try:
        while not should_stop():
            claimed = _textbook_claim(store.conn, queue, worker)
            if claimed is None:
                if stop_when_empty:
                    break
                time.sleep(TEXTBOOK_IDLE_SLEEP)
                continue
            job_id, payload, token = claimed
            json.loads(payload)
            completed += _textbook_complete(store.conn, job_id, token)
    finally:
        store.close()
    return completed


def _textbook_claim(conn: pymysql.connections.Connection, queue: str,
                    worker: str) -> tuple[int, str, str] | None:
    """(id, payload, token) of the job reserved, or None; a deadlock counts as nothing found."""
    token = secrets.token_hex(16)
    try:
        conn.begin()
        with conn.cursor() as cursor:
            cursor.execute(TEXTBOOK_CLAIM_SELECT, (queue,))
            row = cursor.fetchone()
            if row is None:
                conn.commit()
                return None
            job_id, payload = row
            cursor.execute(TEXTBOOK_RESERVE, (token, micros(TEXTBOOK_LEASE_SECONDS), worker,
                                              job_id))
        conn.commit()
    except pymysql.err.OperationalError as exc:
        conn.rollback()
        if error_code(exc) not in DEADLOCK_CODES:
            raise
        return None
    return job_id, payload, token


def _textbook_complete(conn: pymysql.connections.Connection, job_id: int, token: str) -> int:
    conn.begin()
    with conn.cursor() as cursor:
        done = cursor.execute(TEXTBOOK_COMPLETE, (job_id, token))
    conn.commit()
    return done


def ceiling_loop(config: Config, queue: str, batch: int, stop_when_empty: bool = False,
                 should_stop: Callable[[], bool] | None = None,
                 on_ready: Callable[[], None] | None = None) -> int:
    """The ceiling of `prefork-queue bench`: claim up to `batch` jobs per
    transaction, run their no-ops (decode each payload), complete them in the
    transaction that claims the next batch. Opens its own connection (call it
    after a fork). Returns how many jobs it completed."""
    store = MySQLStore(config)
    worker = f"{os.uname().nodename}:{os.getpid()}"
    should_stop = should_stop or (lambda: False)
    if on_ready:
        on_ready()
    held: tuple[list[int], str] = ([], "")
    completed = 0
    try:
        while not should_stop():
            done, claimed = _ceiling_step(store.conn, queue, worker, batch, held)
            completed += done
            if claimed is None:   # a deadlock: what was held is held still
                continue
            for payload in claimed[2]:
                json.loads(payload)
            held = (claimed[0], claimed[1])
            if not held[0]:
                if stop_when_empty:
                    break
                time.sleep(CEILING_IDLE_SLEEP)
        completed += _ceiling_step(store.conn, queue, worker, 0, held)[0]
    finally:
        store.close()
    return completed


def _ceiling_step(conn: pymysql.connections.Connection, queue: str, worker: str, batch: int,
                  held: tuple[list[int], str]
                  ) -> tuple[int, tuple[list[int], str, list[str]] | None]:
    """One transaction: complete the `held` (ids, token), claim up to `batch` more.
    Returns (jobs completed, (ids, token, payloads) claimed), or (0, None) after a
    deadlock (rolled back)."""
    ids, token = held
    new_token = secrets.token_hex(16)
    try:
        conn.begin()
        with conn.cursor() as cursor:
            done = cursor.execute(CEILING_COMPLETE.format(ids=placeholders(len(ids))),
                                  (*ids, token)) if ids else 0
            rows: list[tuple[int, str]] = []
            if batch:
                cursor.execute(CEILING_CLAIM_SELECT, (queue, batch))
                rows = list(cursor.fetchall())
            if rows:
                cursor.execute(CEILING_RESERVE.format(ids=placeholders(len(rows))),
                               (new_token, micros(TEXTBOOK_LEASE_SECONDS), worker,
                                *(row[0] for row in rows)))
        conn.commit()
    except pymysql.err.OperationalError as exc:
        conn.rollback()
        if error_code(exc) not in DEADLOCK_CODES:
            raise
        return 0, None
    return done, ([row[0] for row in rows], new_token, [row[1] for row in rows])


def commit_loop(config: Config, queue: str, should_stop: Callable[[], bool],
                on_ready: Callable[[], None]) -> int:
    """The effects scenario's reference (`queue` unused): one row per durable
    transaction (BEGIN; BENCH_EFFECT_INSERT; COMMIT) until `should_stop`. Opens
    its own connection (call it after a fork). Returns how many it committed."""
    store = MySQLStore(config)
    on_ready()
    committed = 0
    try:
        while not should_stop():
            with store._transaction() as cursor:
                cursor.execute(BENCH_EFFECT_INSERT, (0,))
            committed += 1
    finally:
        store.close()
    return committed


def bench_effects_table(store: MySQLStore, present: bool) -> None:
    """Create (present) or drop the effects scenario's table."""
    store._rowcount(BENCH_CREATE_EFFECTS if present else BENCH_DROP_EFFECTS, ())


def bench_effects_written(store: MySQLStore) -> int:
    """How many rows were ever written to the effects table (its highest id)."""
    return int(store._one(BENCH_EFFECTS_WRITTEN, ())[0])


def bench_unfinished(store: MySQLStore, queue: str) -> int:
    """How many jobs of `queue` are ready or reserved."""
    return int(store._one(BENCH_UNFINISHED, (queue,))[0])


def bench_delete_queue(store: MySQLStore, queue: str) -> int:
    """Delete every row of a scratch queue; returns how many."""
    deleted = 0
    while True:
        count = store._rowcount(BENCH_DELETE_QUEUE, (queue, BENCH_DELETE_CHUNK))
        deleted += count
        if count < BENCH_DELETE_CHUNK:
            return deleted


def bench_unfinished_due(store: MySQLStore, queue: str, priority: int) -> int:
    """How many jobs of `queue` at `priority` are ready and due, or reserved."""
    return int(store._one(BENCH_UNFINISHED_DUE, (queue, priority))[0])


def bench_done(store: MySQLStore, queue: str) -> int:
    """How many jobs of `queue` are done."""
    return int(store._one(BENCH_DONE, (queue,))[0])


def bench_bare_insert(store: MySQLStore, jobs: Sequence[NewJob], delay_seconds: float) -> int:
    """Insert `jobs` (no key, no concurrency key) with the bare multi-row INSERT in
    one transaction, due `delay_seconds` from now; returns how many."""
    now = utc_now()
    due = now + timedelta(seconds=delay_seconds)
    rows = [(job.queue, job.type, job.payload_text, job.priority, job.max_attempts, due, now,
             now) for job in jobs]
    with store._transaction() as cursor:
        return int(cursor.executemany(BENCH_BARE_INSERT, rows) or 0)


def bench_most_reserved_per_group(store: MySQLStore, queue: str) -> int:
    """The most reserved jobs any one limit group of `queue` has now."""
    return int(store._one(BENCH_MOST_RESERVED_PER_GROUP, (queue,))[0])


def bench_limited_done(store: MySQLStore, queue: str) -> int:
    """How many done jobs of `queue` were enqueued as limited."""
    return int(store._one(BENCH_LIMITED_DONE, (queue,))[0])


def bench_delete_limits(store: MySQLStore, job_types: tuple[str, str], key_prefix: str) -> None:
    """Delete the rules of the two limited `job_types` and their groups whose
    concurrency keys start with `key_prefix` (letters, digits, '-' and ':')."""
    store._rowcount(BENCH_DELETE_LIMIT_GROUPS, (*job_types, key_prefix + "%"))
    store._rowcount(BENCH_DELETE_LIMITS, job_types)


def bench_counters(store: MySQLStore) -> tuple[dict[str, int], dict[str, int]]:
    """({name: value} server-wide, {name: value} of this connection) for
    BENCH_COUNTER_NAMES; a counter with no per-connection value shows its
    server-wide one in the second."""
    return _status(store, BENCH_GLOBAL_COUNTERS), _status(store, BENCH_SESSION_COUNTERS)


def _status(store: MySQLStore, sql: str) -> dict[str, int]:
    with store.conn.cursor() as cursor:
        cursor.execute(sql, BENCH_COUNTER_NAMES)
        return {name: int(value) for name, value in cursor.fetchall()}


def bench_fill_done(store: MySQLStore, queue: str, rows: int, job_type: str,
                    payload_text: str) -> Iterator[int]:
    """Fill `queue` with `rows` done jobs by doubling; yields the count after each step."""
    store._rowcount(BENCH_SEED_DONE, (queue, job_type, payload_text))
    have = 1
    while have < rows:
        have += store._rowcount(BENCH_DOUBLE_DONE, (queue, min(have, rows - have)))
        yield have
