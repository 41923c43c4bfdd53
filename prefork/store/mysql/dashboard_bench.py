"""The MySQL side of the dashboard's speed check (prefork/bench/dashboard_data.py):
filling an empty queue database with a big history, server-side, and timing
the build of migration 0004's indexes on it. An admin tool: it creates and
drops a scratch table and rebuilds indexes.

The history is one INSERT ... SELECT over a table of digits, ordered, so that
ids follow creation times as they do in a real queue: n = 0 .. rows-1, created
a fixed spacing apart up to now; the newest `ready` rows are ready (a tenth of
them delayed an hour), every eleventh older one dead, the rest done; four
queues, eight job types (each of one queue), every other job with a key.
"""
import time
from datetime import datetime

from ..contract import packaged_migrations
from .schema import _split_statements
from .store import MySQLStore

DIGITS_CREATE = "CREATE TABLE prefork_bench_digits (d INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"
DIGITS_FILL = "INSERT INTO prefork_bench_digits (d) VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)"
DIGITS_DROP = "DROP TABLE IF EXISTS prefork_bench_digits"

# ((rows, ready rows) four times, start, spacing in microseconds, first n, end n):
# n below 2,000,000 from seven digits (the last one 0 or 1), a chunk at a time.
FILL_JOBS = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, status, attempts,"
    " available_at, created_at, updated_at, finished_at, last_error)"
    " SELECT ELT(1 + n MOD 4, 'default', 'mail', 'reports', 'webhooks'),"
    " ELT(1 + n MOD 8, 'app.work', 'mail.send', 'report.build', 'hook.post',"
    " 'app.sync', 'mail.digest', 'report.export', 'hook.retry'),"
    " CONCAT('{\"n\":', n, '}'), IF(n MOD 2 = 0, CONCAT('order-', n), NULL),"
    " CASE WHEN n >= %s - %s THEN 'ready' WHEN n MOD 11 = 5 THEN 'dead' ELSE 'done' END,"
    " IF(n >= %s - %s, 0, 1),"
    " created + INTERVAL IF(n MOD 10 = 0 AND n >= %s - %s, 3600, 0) SECOND,"
    " created, created, IF(n >= %s - %s, NULL, created + INTERVAL 1 SECOND),"
    " IF(n MOD 11 = 5, 'ValueError: no such customer', NULL)"
    " FROM (SELECT n, %s + INTERVAL n * %s MICROSECOND AS created FROM ("
    " SELECT d1.d + 10 * d2.d + 100 * d3.d + 1000 * d4.d + 10000 * d5.d + 100000 * d6.d"
    " + 1000000 * d7.d AS n FROM prefork_bench_digits AS d1, prefork_bench_digits AS d2,"
    " prefork_bench_digits AS d3, prefork_bench_digits AS d4, prefork_bench_digits AS d5,"
    " prefork_bench_digits AS d6, prefork_bench_digits AS d7 WHERE d7.d < 2) AS numbers"
    " WHERE n >= %s AND n < %s) AS history ORDER BY n")

# The rollup of those days: every minute from the start (minutes, start minute),
# each of the four queues' two types on two supervisors.
FILL_MINUTES = (
    "INSERT INTO prefork_minutes (minute, queue, job_type, process_id, host, done, failed,"
    " dead, run_seconds)"
    " SELECT %s + INTERVAL m.n MINUTE, ELT(1 + q.d, 'default', 'mail', 'reports', 'webhooks'),"
    " ELT(1 + q.d + 4 * t.d, 'app.work', 'mail.send', 'report.build', 'hook.post',"
    " 'app.sync', 'mail.digest', 'report.export', 'hook.retry'),"
    " 1 + p.d, CONCAT('host-', p.d), 20 + m.n MOD 7, m.n MOD 3, m.n MOD 11 = 0, 12.5"
    " FROM (SELECT d1.d + 10 * d2.d + 100 * d3.d + 1000 * d4.d + 10000 * d5.d AS n"
    " FROM prefork_bench_digits AS d1, prefork_bench_digits AS d2, prefork_bench_digits AS d3,"
    " prefork_bench_digits AS d4, prefork_bench_digits AS d5 WHERE d5.d < 2) AS m,"
    " prefork_bench_digits AS q, prefork_bench_digits AS t, prefork_bench_digits AS p"
    " WHERE m.n < %s AND q.d < 4 AND t.d < 2 AND p.d < 2")

DROP_DASHBOARD_INDEXES = (
    "ALTER TABLE prefork_jobs DROP INDEX ix_prefork_jobs_status,"
    " DROP INDEX ix_prefork_jobs_status_queue, DROP INDEX ix_prefork_jobs_status_type,"
    " DROP INDEX ix_prefork_jobs_key, DROP INDEX ix_prefork_jobs_created")

DASHBOARD_MIGRATION = 4
FILL_CHUNK = 100_000   # rows per INSERT ... SELECT: seconds each, on a slow machine too


def fill(store: MySQLStore, rows: int, ready: int, start: datetime, spacing_seconds: float,
         minutes: int, first_minute: datetime) -> None:
    """The history and its rollup (see the module's docstring)."""
    spacing = int(spacing_seconds * 1_000_000)
    store._rowcount(DIGITS_DROP)
    store._rowcount(DIGITS_CREATE)
    try:
        store._rowcount(DIGITS_FILL)
        for first in range(0, rows, FILL_CHUNK):   # in n order: ids follow creation
            store._rowcount(FILL_JOBS, (rows, ready) * 4 + (
                start, spacing, first, min(rows, first + FILL_CHUNK)))
        store._rowcount(FILL_MINUTES, (first_minute, minutes))
    finally:
        store._rowcount(DIGITS_DROP)


def rebuild_dashboard_indexes(store: MySQLStore) -> float:
    """Drop migration 0004's indexes and build them again with its own ALTER TABLE
    (online: INPLACE, LOCK=NONE); the seconds the build took."""
    store._rowcount(DROP_DASHBOARD_INDEXES)
    [sql] = [sql for version, _, sql in packaged_migrations("mysql")
             if version == DASHBOARD_MIGRATION]
    [alter] = [statement for statement in _split_statements(sql)
               if statement.startswith("ALTER TABLE prefork_jobs")]
    started = time.monotonic()
    store._rowcount(alter)
    return time.monotonic() - started
