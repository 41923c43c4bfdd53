"""How fast the dashboard's data is on a big table: fill an empty MySQL/MariaDB queue
database with a week of history (by default 1,000,000 done jobs, 100,000 dead,
10,000 ready, and the per-minute rollup of two supervisors), then time each
store read the pages make at p95 over `calls` calls, and the build of
migration 0004's indexes on that table.

    python -m prefork.bench.dashboard_data --dsn mysql://root@127.0.0.1:3306/scratch
                                           [--dialect mysql] [--calls 50]

An admin tool for a scratch database: it refuses a database that holds jobs.
"""
import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..config import Config, load
from ..errors import UserError
from ..jobs import JobStatus, utc_now
from ..logs import error_class
from ..store import driver_errors
from ..store.mysql.dashboard_bench import fill, rebuild_dashboard_indexes
from ..store.mysql.store import MySQLStore
from ..store.views import MAX_PAGE, JobFilter

DONE, DEAD, READY = 1_000_000, 100_000, 10_000
DAYS = 7
PAGE = 50


def p95(seconds: Sequence[float]) -> float:
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def timed(action: Callable[[], Any], calls: int) -> tuple[float, float, Any]:
    """(p95 ms, max ms, the last result) of `calls` calls after one untimed call (the
    pages a dashboard keeps open read from a warm buffer pool)."""
    seconds, result = [], action()
    for _ in range(calls):
        started = time.perf_counter()
        result = action()
        seconds.append(time.perf_counter() - started)
    return p95(seconds) * 1000, max(seconds) * 1000, result


def readings(store: MySQLStore, now: datetime, top_id: int) -> list[tuple[str, Callable[[], Any]]]:
    """What the pages read, each as (name, call)."""
    day_ago = now - timedelta(days=1)

    def keyed(prefix: str) -> int:   # the fill keys every even n: "order-<n>"
        return sum(1 for n in range(0, DONE + DEAD + READY, 2) if f"order-{n}".startswith(prefix))

    def jobs(**fields: Any) -> Callable[[], Any]:
        after = fields.pop("after", None)
        return lambda: store.find_jobs(JobFilter(**fields), after, PAGE)

    return [
        ("queue_overview()", store.queue_overview),
        ("throughput(last hour)", lambda: store.throughput(now - timedelta(hours=1))),
        ("throughput(last day)", lambda: store.throughput(day_ago)),
        ("throughput(last day, one queue)", lambda: store.throughput(day_ago, "mail")),
        ("find_jobs(no filter)", jobs()),
        ("find_jobs(no filter, page in the middle)", jobs(after=top_id // 2)),
        ("find_jobs(dead)", jobs(status=JobStatus.DEAD)),
        ("find_jobs(dead, page in the middle)", jobs(status=JobStatus.DEAD, after=top_id // 2)),
        ("find_jobs(ready)", jobs(status=JobStatus.READY)),
        ("find_jobs(done, queue)", jobs(status=JobStatus.DONE, queue="mail")),
        ("find_jobs(type)", jobs(job_type="report.build")),
        ("find_jobs(queue, type, dead)", jobs(queue="mail", job_type="mail.send",
                                              status=JobStatus.DEAD)),
        ("find_jobs(id)", jobs(job_id=top_id // 3)),
        (f"find_jobs(key prefix, {keyed('order-12345')} matches)", jobs(key_prefix="order-12345")),
        (f"find_jobs(key prefix, {keyed('order-1'):,} matches)", jobs(key_prefix="order-1")),
        ("find_jobs(created: an hour a day ago)", jobs(created_from=day_ago,
                                                       created_to=day_ago + timedelta(hours=1))),
        ("find_jobs(created: an hour a day ago, dead)", jobs(
            created_from=day_ago, created_to=day_ago + timedelta(hours=1),
            status=JobStatus.DEAD)),
        ("get(id)", lambda: store.get(top_id // 3)),
    ]


def walk_dead(store: MySQLStore) -> tuple[int, float, float]:
    """Page through every dead job's id in batches of MAX_PAGE, as a bulk action does:
    (ids, seconds in all, p95 ms of a batch)."""
    seconds, count, after = [], 0, None
    while True:
        started = time.perf_counter()
        page = store.find_jobs(JobFilter(status=JobStatus.DEAD), after, MAX_PAGE)
        seconds.append(time.perf_counter() - started)
        count += len(page.rows)
        if page.next_after is None:
            return count, sum(seconds), p95(seconds) * 1000
        after = page.next_after


def run(config: Config, calls: int, out: Any = sys.stdout) -> None:
    store = MySQLStore(config)
    try:
        store.migrate()
        if store.find_jobs(JobFilter(), None, 1).rows:
            raise UserError("the database holds jobs: give an empty scratch database")
        now = utc_now()
        rows = DONE + DEAD + READY
        start = now - timedelta(days=DAYS)
        started = time.monotonic()
        fill(store, rows, READY, start, DAYS * 86400 / rows, DAYS * 1440,
             start.replace(second=0, microsecond=0))
        print(f"dialect {store.dialect}; filled {rows:,} jobs ({DONE:,} done, {DEAD:,} dead, "
              f"{READY:,} ready) and {DAYS} days of rollup in "
              f"{time.monotonic() - started:.1f} s", file=out)
        print(f"migration 0004's five indexes built on that table in "
              f"{rebuild_dashboard_indexes(store):.1f} s (online: INPLACE, LOCK=NONE)", file=out)
        top_id = store.find_jobs(JobFilter(), None, 1).rows[0]["id"]
        print(f"{'read':48} {'p95 ms':>8} {'max ms':>8}  ({calls} calls each)", file=out)
        for name, action in readings(store, now, top_id):
            worst95, worst, _ = timed(action, calls)
            print(f"{name:48} {worst95:8.1f} {worst:8.1f}", file=out)
        count, total, batch95 = walk_dead(store)
        print(f"every dead id in pages of {MAX_PAGE}: {count:,} ids in {total:.2f} s "
              f"(p95 {batch95:.1f} ms a page)", file=out)
    finally:
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="an empty scratch MySQL/MariaDB database")
    parser.add_argument("--dialect", default="auto", help="auto, mariadb or mysql")
    parser.add_argument("--calls", type=int, default=50, help="calls per read (default 50)")
    args = parser.parse_args(argv)
    try:
        # Filling and indexing a million rows takes longer than a job's statements.
        run(load({"dsn": args.dsn, "dialect": args.dialect, "read_timeout": "600",
                  "write_timeout": "600"}), args.calls)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except driver_errors() as exc:
        print(f"error: the database failed: {error_class(exc)}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
