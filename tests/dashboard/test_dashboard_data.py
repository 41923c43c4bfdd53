"""The data the dashboard reads (store.find_jobs, queue_overview, throughput) and the
per-minute rollup supervisors write, on SQLite and on MariaDB in both dialects.

Filters are checked against the rows themselves: each filter (and combinations)
must return exactly the jobs a plain reading of the table says, page by page.
Keyset paging is checked while jobs are inserted, claimed, completed, killed and
retried between pages. On MariaDB, EXPLAIN shows each read on its index, with no
full scan and no sort. The rollup is checked against what a real supervisor ran
(`prefork-queue run`, stopped by SIGTERM), also across a database restart.
"""
import signal
import socket
import time
from datetime import datetime, timedelta

import pytest
from conftest import (
    DIALECT_ENV,
    MySQLTestDatabase,
    SQLiteTestDatabase,
    _config_maker,
    run_cli,
    wait_until,
)
from harness import SupervisorProcess
from throwaway_db import throwaway_mariadb  # noqa: F401  (a pytest fixture)

from prefork import config as config_module
from prefork.dashboard import data
from prefork.errors import UserError
from prefork.jobs import JobStatus, new_job, utc_now
from prefork.store import job_search
from prefork.store.mysql.dashboard import FIND_STATEMENTS as MYSQL_FIND
from prefork.store.mysql.dashboard_queries import DEAD_COUNTS, ROLLUP_LAST_HOUR, THROUGHPUT
from prefork.store.mysql.store import MySQLStore
from prefork.store.registry_rows import Published
from prefork.store.sqlite.file import parse_dsn, stamp
from prefork.store.sqlite.store import SQLiteStore
from prefork.store.views import JobFilter, MinuteCounts, MinutePoint, QueueOverview

CASES = ("sqlite", "mariadb", "mysql")   # SQLite; MariaDB in each SQL dialect
BASE = datetime(2026, 1, 1, 12, 0)
# Wildcards, the escape character, the last character (no key range ends above it).
KEY_STEMS = ("ord-", "ord_", "50%off", "a!b", None, "\U0010ffff")


class Dash:
    def __init__(self, case, store, dsn, raw):
        self.case, self.store, self.dsn, self.raw = case, store, dsn, raw

    def set(self, job_id, **columns):
        """Set columns of a job behind the store's back (times as UTC text)."""
        names = ", ".join(f"{name} = %s" for name in columns)
        values = [value.isoformat(sep=" ", timespec="microseconds")
                  if isinstance(value, datetime) else value for value in columns.values()]
        self.raw.execute(f"UPDATE prefork_jobs SET {names} WHERE id = %s", [*values, job_id])

    def rows(self):
        top = self.raw.scalar("SELECT MAX(id) FROM prefork_jobs") or 0
        return [row for row in (self.raw.row(job_id) for job_id in range(1, top + 1)) if row]

    def query(self, sql, args=()):
        """All rows of a read (SQL with %s placeholders)."""
        if self.case == "sqlite":
            return self.raw.conn.execute(self.raw.sql(sql), args).fetchall()
        with self.raw.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()

    def rollup(self):
        """{(queue, job_type): [done, failed, dead, run_seconds]} summed over minutes."""
        found = {}
        for queue, job_type, *counts in self.query(
                "SELECT queue, job_type, done, failed, dead, run_seconds FROM prefork_minutes"):
            totals = found.setdefault((queue, job_type), [0, 0, 0, 0.0])
            for index, value in enumerate(counts):
                totals[index] += value
        return found


@pytest.fixture(params=CASES)
def dash(request, monkeypatch):
    if request.param == "sqlite":
        dsn = request.getfixturevalue("sqlite_migrated")
        raw = SQLiteTestDatabase(parse_dsn(dsn))
        store = SQLiteStore(config_module.load({"dsn": dsn}, environ={}))
    else:
        dsn = request.getfixturevalue("migrated")
        raw = MySQLTestDatabase(request.getfixturevalue("clean_db"), dsn.rsplit("/", 1)[1])
        raw.execute("TRUNCATE prefork_minutes")
        monkeypatch.setenv(DIALECT_ENV, request.param)   # for the commands a test runs
        store = MySQLStore(_config_maker(dsn, request.param)())
        assert type(store).__name__ == ("PortableMySQLStore" if request.param == "mysql"
                                        else "MySQLStore")
    yield Dash(request.param, store, dsn, raw)
    store.close()
    if request.param == "sqlite":
        raw.close()


def page_through(store, job_filter, limit=5, between=None):
    """Every id find_jobs returns for the filter, page by page (between(page) runs
    after each page); fails on a page longer than the limit."""
    ids, after = [], None
    while True:
        page = store.find_jobs(job_filter, after, limit)
        assert len(page.rows) <= limit
        ids += [row["id"] for row in page.rows]
        assert all("payload" not in row and "error_history" not in row for row in page.rows)
        if page.next_after is None:
            return ids
        assert page.next_after == page.rows[-1]["id"]
        after = page.next_after
        if between:
            between(page)


def matches(row, job_filter):
    key, prefix = row["idempotency_key"], job_filter.key_prefix
    return all((
        job_filter.queue in (None, row["queue"]),
        job_filter.status in (None, row["status"]),
        job_filter.job_type in (None, row["job_type"]),
        job_filter.job_id in (None, row["id"]),
        prefix is None or (key is not None and key.startswith(prefix)),
        job_filter.created_from is None or row["created_at"] >= job_filter.created_from,
        job_filter.created_to is None or row["created_at"] < job_filter.created_to))


def fill(dash, count=60):
    """Jobs over two queues, three types, every state, keys of every stem, created a
    minute apart in id order (but one, 30 s out of order)."""
    ids = []
    for index in range(count):
        stem = KEY_STEMS[index % len(KEY_STEMS)]
        ids.append(dash.store.enqueue(new_job(
            ("a.x", "b.y", "c.z")[index % 3], {"n": index}, queue=("q1", "q2")[index % 2],
            key=None if stem is None else f"{stem}{index}")))
    states = (JobStatus.READY, JobStatus.DONE, JobStatus.DEAD, JobStatus.RESERVED,
              JobStatus.DONE, JobStatus.READY, JobStatus.DEAD)
    for index, job_id in enumerate(ids):
        created = BASE + timedelta(minutes=index)
        if index == 31:
            created -= timedelta(seconds=90)   # before its predecessor, within the slack
        dash.set(job_id, status=states[index % len(states)].value, created_at=created)
    return ids


FILTERS = [
    JobFilter(),
    *[JobFilter(status=status) for status in JobStatus],
    JobFilter(queue="q1"), JobFilter(queue="nope"),
    JobFilter(job_type="b.y"), JobFilter(queue="q2", job_type="c.z"),
    JobFilter(queue="q1", status=JobStatus.DEAD), JobFilter(job_type="a.x", status=JobStatus.DONE),
    JobFilter(queue="q2", job_type="b.y", status=JobStatus.READY),
    JobFilter(key_prefix="ord"), JobFilter(key_prefix="ord-"), JobFilter(key_prefix="ord_"),
    JobFilter(key_prefix="50%"), JobFilter(key_prefix="a!b1"), JobFilter(key_prefix="%"),
    JobFilter(key_prefix="_"), JobFilter(key_prefix="\U0010ffff"),
    JobFilter(key_prefix="ord-1", status=JobStatus.DONE, queue="q2"),
    JobFilter(created_from=BASE + timedelta(minutes=30)),
    JobFilter(created_to=BASE + timedelta(minutes=30)),
    JobFilter(created_from=BASE + timedelta(minutes=29, seconds=30),
              created_to=BASE + timedelta(minutes=31)),
    JobFilter(created_from=BASE + timedelta(minutes=10), created_to=BASE + timedelta(minutes=50),
              queue="q1", status=JobStatus.DEAD),
    JobFilter(created_from=BASE + timedelta(days=1)), JobFilter(created_to=BASE),
    JobFilter(key_prefix="ord", created_from=BASE + timedelta(minutes=20), job_type="a.x"),
]


def test_each_filter_returns_exactly_the_jobs_it_names(dash):
    ids = fill(dash)
    rows = dash.rows()
    filters = FILTERS + [JobFilter(job_id=ids[7]), JobFilter(job_id=ids[7], queue="q1"),
                         JobFilter(job_id=ids[8], status=JobStatus.DEAD, key_prefix="ord_")]
    for job_filter in filters:
        expected = sorted((row["id"] for row in rows if matches(row, job_filter)), reverse=True)
        assert page_through(dash.store, job_filter) == expected, job_filter
        assert page_through(dash.store, job_filter, limit=500) == expected, job_filter
    assert any(page_through(dash.store, job_filter) for job_filter in filters[1:])


def test_a_page_lists_what_get_shows_but_the_payload(dash):
    job_id = dash.store.enqueue(new_job("a.x", {"secret": "s3"}, key="k-1"))
    [row] = dash.store.find_jobs(JobFilter(job_id=job_id), None, 10).rows
    full = dash.store.get(job_id)
    assert row == {name: value for name, value in full.items()
                   if name not in ("payload", "error_history")}


def test_a_page_size_out_of_bounds_is_refused(dash):
    for limit in (0, -1, 501):
        with pytest.raises(UserError, match="page size must be 1 to 500"):
            dash.store.find_jobs(JobFilter(), None, limit)


def test_paging_has_no_gap_nor_repeat_while_jobs_change(dash):
    store = dash.store
    first = [store.enqueue(new_job("a.x", {"n": n}, queue="q1")) for n in range(40)]
    for job_id in first[::3]:
        dash.set(job_id, status="dead")
    dead_throughout = {job_id for job_id in first[::3]}
    retried = []

    def churn(page):
        store.enqueue_many([new_job("a.x", {"n": "new"}, queue="q1") for _ in range(3)])
        for job in store.claim(["q1"], "test:1", 30, limit=2):   # the newest ready first
            store.complete(job)
        listed_dead = [row["id"] for row in page.rows if row["status"] == "dead"]
        if listed_dead:   # one already listed leaves the dead state, a newer one dies
            store.retry_dead([listed_dead[0]])
            retried.append(listed_dead[0])
        dash.set(store.enqueue(new_job("a.x", {"n": "dies"}, queue="q1")), status="dead")

    everything = page_through(store, JobFilter(queue="q1"), limit=6, between=churn)
    assert len(everything) == len(set(everything))
    assert set(first) <= set(everything)
    dead = page_through(store, JobFilter(queue="q1", status=JobStatus.DEAD), limit=4,
                        between=churn)
    assert len(dead) == len(set(dead))
    still_dead = dead_throughout - set(retried)
    assert still_dead <= set(dead) and retried


def test_a_supervisor_is_stale_on_the_dashboard_by_its_own_heartbeat_interval(dash):
    """Issue 28: silent for 3 s, a supervisor beating every second is stale to a
    dashboard whose own interval is 600 s; one that published no interval (an older
    release) is judged by the dashboard's."""
    quick = dash.store.register_process("web-1", 1, ["default"], 2, "0.2.0",
                                        Published.of(["noop"], 1.0))
    unknown = dash.store.register_process("web-2", 2, ["default"], 2, "0.1.0")
    if dash.case == "sqlite":
        dash.raw.execute("UPDATE prefork_processes SET heartbeat_at = %s",
                         (stamp(utc_now() - timedelta(seconds=3)),))
    else:
        dash.raw.execute("UPDATE prefork_processes"
                         " SET heartbeat_at = UTC_TIMESTAMP(6) - INTERVAL 3 SECOND")
    shown = {sup["id"]: sup for sup in data.supervisors(dash.store, 600.0)}
    assert (shown[quick]["stale"], shown[quick]["heartbeat_interval_s"]) == (True, 1.0)
    assert (shown[unknown]["stale"], shown[unknown]["heartbeat_interval_s"]) == (False, 600.0)
    assert [sup["stale"] for sup in data.overview(dash.store, 600.0)["supervisors"]] == \
        [True, False]


def test_overview_counts_live_jobs_and_the_rollups_last_hour(dash):
    store = dash.store
    for n in range(4):
        store.enqueue(new_job("a.x", {"n": n}, queue="mail"))
    store.enqueue(new_job("a.x", {}, queue="mail", delay=3600))
    [claimed] = store.claim(["mail"], "test:1", 30)
    dead_id = store.enqueue(new_job("b.y", {}, queue="reports"))
    dash.set(dead_id, status="dead")
    store.set_paused("idle", True)
    now = datetime.utcnow().replace(second=0, microsecond=0)
    store.write_minutes(1, "h1", [
        MinuteCounts(now - timedelta(minutes=2), "mail", "a.x", 10, 2, 1, 5.0),
        MinuteCounts(now - timedelta(minutes=2), "mail", "c.z", 5, 0, 0, 1.0),
        MinuteCounts(now - timedelta(minutes=30), "mail", "a.x", 7, 1, 0, 2.0),
        MinuteCounts(now - timedelta(minutes=90), "mail", "a.x", 1000, 1000, 0, 1.0),
        MinuteCounts(now - timedelta(minutes=10), "archive", "a.x", 3, 0, 0, 1.0)])
    store.write_minutes(2, "h2", [MinuteCounts(now - timedelta(minutes=2), "mail", "a.x",
                                               5, 0, 0, 1.0)])
    by_queue = {overview.queue: overview for overview in store.queue_overview()}
    assert list(by_queue) == ["archive", "idle", "mail", "reports"]
    mail = by_queue["mail"]
    assert (mail.ready, mail.delayed, mail.reserved, mail.dead) == (3, 1, 1, 0)
    assert (mail.done_last_hour, mail.failed_last_hour, mail.per_minute) == (27, 3, 4.0)
    assert 0 <= mail.oldest_ready_age_s < 60 and not mail.paused
    assert by_queue["idle"] == QueueOverview("idle", 0, 0, 0, 0, 0, 0, 0.0, None, True)
    assert by_queue["reports"].dead == 1 and by_queue["reports"].oldest_ready_age_s is None
    assert by_queue["archive"].done_last_hour == 3 and by_queue["archive"].per_minute == 0.0
    store.complete(claimed)


def test_throughput_sums_hosts_and_types_per_minute(dash):
    store = dash.store
    minute = datetime(2026, 3, 1, 8, 0)
    store.write_minutes(1, "h1", [MinuteCounts(minute, "mail", "a.x", 3, 1, 1, 1.0),
                                  MinuteCounts(minute, "mail", "b.y", 2, 0, 0, 1.0),
                                  MinuteCounts(minute, "web", "a.x", 4, 2, 0, 1.0),
                                  MinuteCounts(minute + timedelta(minutes=2), "mail", "a.x",
                                               1, 0, 0, 0.5)])
    store.write_minutes(2, "h2", [MinuteCounts(minute, "mail", "a.x", 10, 0, 0, 1.0)])
    store.write_minutes(1, "h1", [MinuteCounts(minute, "mail", "a.x", 6, 1, 1, 2.0)])  # replaces
    assert store.throughput(minute - timedelta(hours=1)) == [
        MinutePoint(minute, 22, 3, 1), MinutePoint(minute + timedelta(minutes=2), 1, 0, 0)]
    assert store.throughput(minute, queue="mail") == [
        MinutePoint(minute, 18, 1, 1), MinutePoint(minute + timedelta(minutes=2), 1, 0, 0)]
    assert store.throughput(minute + timedelta(minutes=1)) == [
        MinutePoint(minute + timedelta(minutes=2), 1, 0, 0)]
    assert store.throughput(minute, queue="none") == []


def test_prune_removes_rollup_minutes_older_than_the_done_age(dash):
    old, recent = datetime.utcnow() - timedelta(days=3), datetime.utcnow() - timedelta(hours=1)
    dash.store.write_minutes(1, "h", [
        MinuteCounts(old.replace(second=0, microsecond=0) + timedelta(minutes=n), "q", "t",
                     1, 0, 0, 0.1) for n in range(5)] + [
        MinuteCounts(recent.replace(second=0, microsecond=0), "q", "t", 2, 0, 0, 0.1)])
    result = run_cli("prune", "--done-older-than", "2d", dsn=dash.dsn)
    assert result.returncode == 0, result.stderr
    assert "deleted 5 old supervisor records" in result.stdout
    assert dash.rollup() == {("q", "t"): [2, 0, 0, pytest.approx(0.1)]}


# --- what EXPLAIN says on MariaDB ---------------------------------------------------------

class Explainer:
    """A PageReader that EXPLAINs each read find_page would make, instead of making it."""

    def __init__(self, store):
        self.store, self.plans = store, []

    def read_page(self, path, params):
        with self.store.conn.cursor() as cursor:
            cursor.execute("EXPLAIN " + MYSQL_FIND[path], params)
            names = [column[0] for column in cursor.description]
            self.plans += [(path, dict(zip(names, row))) for row in cursor.fetchall()]
        return []

    def created_id(self, first, moment):
        return self.store.created_id(first, moment)

    def snapshot(self):
        return self.store.snapshot()


INDEX_OF = {job_search.Path.ID: "PRIMARY", job_search.Path.KEY: "ix_prefork_jobs_key",
            job_search.Path.KEY_ONLY: "ix_prefork_jobs_key",
            job_search.Path.TYPE: "ix_prefork_jobs_status_type",
            job_search.Path.QUEUE: "ix_prefork_jobs_status_queue",
            job_search.Path.STATUS: "ix_prefork_jobs_status"}
SORTING = (job_search.Path.KEY, job_search.Path.KEY_ONLY)


def check_plan(job_filter, path, plan, limit):
    """One row of EXPLAIN: the path's index (or the primary key, to fetch a page's rows
    by id), never a full scan, a sort only of a key prefix's matches."""
    extra = plan["Extra"] or ""
    if "Impossible WHERE" in extra:   # its id bounds hold no id: nothing is read
        return
    if plan["table"].startswith("<derived"):   # a page of ids, sorted again: tiny
        assert int(plan["rows"]) <= limit, (job_filter, plan)
        return
    if plan["key"] == "PRIMARY" and plan["type"] == "eq_ref":   # a page's rows, by id
        assert path is job_search.Path.KEY_ONLY, (job_filter, plan)
        return
    assert plan["key"] == INDEX_OF[path], (job_filter, plan)
    assert plan["type"] in ("range", "const", "ref"), (job_filter, plan)
    assert ("filesort" in extra) == (path in SORTING), (job_filter, plan)
    if path is job_search.Path.KEY_ONLY:   # the matches sorted are index entries, not rows
        assert "Using index" in [part.strip() for part in extra.split(";")], (job_filter, plan)


@pytest.mark.parametrize("case", ("mariadb", "mysql"))
def test_explain_shows_every_read_on_its_index_without_a_sort(case, migrated, clean_db,
                                                               monkeypatch):
    clean_db.cursor().execute("TRUNCATE prefork_minutes")
    store = MySQLStore(_config_maker(migrated, case)())
    try:
        dash = Dash(case, store, migrated, MySQLTestDatabase(clean_db, migrated.rsplit("/", 1)[1]))
        fill(dash, count=300)
        store.write_minutes(1, "h", [MinuteCounts(BASE + timedelta(minutes=n), "q1", "a.x",
                                                  1, 0, 0, 0.1) for n in range(100)])
        clean_db.cursor().execute("ANALYZE TABLE prefork_jobs")
        explainer = Explainer(store)
        for job_filter in FILTERS + [JobFilter(job_id=5, queue="q1")]:
            explainer.plans.clear()
            job_search.find_page(explainer, job_filter, 200, 50)
            path = job_search.path_of(job_filter)
            assert explainer.plans, job_filter
            for _, plan in explainer.plans:
                check_plan(job_filter, path, plan, 51)
        # Grouped in index order, but the last hour's rollup rows by queue (an
        # hour of them: a small temporary table).
        for statement, params, index, grouped_in_order in (
                (THROUGHPUT, {"since": BASE, "queue": None}, "PRIMARY", True),
                (ROLLUP_LAST_HOUR, job_search.rollup_window(BASE), "PRIMARY", False),
                (DEAD_COUNTS, None, "ix_prefork_jobs_claim", True)):
            with store.conn.cursor() as cursor:
                cursor.execute("EXPLAIN " + statement, params)
                names = [column[0] for column in cursor.description]
                plan = dict(zip(names, cursor.fetchone()))
            assert plan["key"] == index and plan["type"] in ("range", "ref"), plan
            assert ("temporary" not in (plan["Extra"] or "")) == grouped_in_order, plan
    finally:
        store.close()


# --- the rollup a real supervisor writes -------------------------------------------------

JOBS_RUN = [("dash.ok", {}, "default")] * 5 + [("dash.ok", {}, "other")] * 3 + [
    ("dash.flaky", {"succeed_at": 2}, "default")] * 2 + [
    ("dash.flaky", {}, "default"), ("dash.poison", {}, "other"), ("dash.poison", {}, "other"),
    ("dash.crash", {}, "default")]


def settled(store):
    counts = store.counts()
    return not counts.get("ready") and not counts.get("reserved")


def expected_rollup(dash):
    """{(queue, type): [done, failed, dead]} from the jobs themselves: every attempt
    but a done job's last failed."""
    expected = {}
    for row in dash.rows():
        totals = expected.setdefault((row["queue"], row["job_type"]), [0, 0, 0])
        done = row["status"] == "done"
        totals[0] += done
        totals[1] += row["attempts"] - done
        totals[2] += row["status"] == "dead"
    return expected


def run_supervisor(tmp_path, dash, *args, name="sup"):
    sup = SupervisorProcess(tmp_path, dash.dsn, "--app", "dashboard_app", "--workers", "2",
                            "--queues", "default,other", "--max-crashes", "1",
                            "--poll-interval", "0.2", *args, name=name)
    sup.wait_event("supervisor_started")
    return sup


def enqueue_all(store, jobs):
    store.enqueue_many([new_job(job_type, payload, queue=queue)
                        for job_type, payload, queue in jobs])


def test_the_rollup_counts_what_a_supervisor_ran(dash, tmp_path):
    sup = run_supervisor(tmp_path, dash)
    try:
        enqueue_all(dash.store, JOBS_RUN)
        wait_until(lambda: settled(dash.store), timeout=60, message="every job to settle")
        sup.signal(signal.SIGTERM)
        assert sup.wait_exit(timeout=30) == 0
    finally:
        sup.kill_all()
    assert not sup.events("rollup_unwritten")
    written = dash.rollup()
    assert {key: totals[:3] for key, totals in written.items()} == expected_rollup(dash) == {
        ("default", "dash.ok"): [5, 0, 0], ("other", "dash.ok"): [3, 0, 0],
        ("default", "dash.flaky"): [2, 5, 1], ("other", "dash.poison"): [0, 2, 2],
        ("default", "dash.crash"): [0, 1, 1]}
    assert all(totals[3] > 0 for totals in written.values())
    process_id = sup.events("supervisor_registered")[0]["process_id"]
    assert {tuple(row) for row in dash.query("SELECT DISTINCT process_id, host"
                                             " FROM prefork_minutes")} == {
        (process_id, socket.gethostname())}


BURST = 30   # jobs done and jobs dead in each burst


def test_the_overview_and_charts_show_jobs_while_their_minute_is_under_way(dash, tmp_path):
    """Issue 28: 30 done and 30 dead jobs are in the overview's last hour and in the
    charts while the minute they ended in is under way: the supervisor writes the
    minute so far every heartbeat, not once it is over. Shown while their minute is
    under way proves it, however long the jobs took; a burst that ends too near the
    end of its minute to tell is followed by another."""
    sup = run_supervisor(tmp_path, dash)
    try:
        for burst in range(1, 4):
            wait_until(lambda: utc_now().second < 40, timeout=25, interval=0.2,
                       message="the first 40 s of a minute")
            enqueue_all(dash.store, [("dash.ok", {}, "default"), ("dash.poison", {}, "default")]
                        * BURST)
            seen_in = wait_until(lambda: shown_in(dash.store, BURST * burst), timeout=120,
                                 interval=0.2, message=f"burst {burst} on the overview")
            ended_in = {minute for (minute,) in dash.query(
                "SELECT DISTINCT minute FROM prefork_minutes")}
            if seen_in in {_naive(minute) for minute in ended_in}:
                break
        else:
            raise AssertionError("no burst was shown while the minute it ended in was under way")
    finally:
        sup.kill_all()


def shown_in(store, jobs):
    """The minute (this host's UTC clock, read after the store answered) in which the
    default queue's last hour and the chart's points count `jobs` done and `jobs` dead;
    None while they count fewer."""
    (figures,) = [item for item in store.queue_overview() if item.queue == "default"] or [None]
    points = store.throughput(utc_now() - timedelta(hours=1), "default")
    minute = utc_now().replace(second=0, microsecond=0)
    counted = (figures.done_last_hour, figures.failed_last_hour) if figures else (0, 0)
    charted = (sum(point.done for point in points), sum(point.dead for point in points))
    return minute if counted == (jobs, jobs) and charted == (jobs, jobs) else None


def _naive(minute):
    """A rollup minute as read back (SQLite: text) as a naive datetime."""
    return datetime.fromisoformat(minute) if isinstance(minute, str) else minute


# The rollup is written every heartbeat interval: this one is long enough for the
# first jobs to settle before their write, and short enough for no hold during the
# outage (a supervisor holds after two intervals or a third of its timeout).
SLOW_ROLLUP = ("--heartbeat-interval", "20", "--supervisor-timeout", "120")


def test_a_database_restart_loses_no_rollup_counts(throwaway_mariadb, tmp_path):  # noqa: F811
    server = throwaway_mariadb
    config = config_module.load({"dsn": server.dsn}, environ={})
    store = MySQLStore(config)
    store.migrate()
    conn = server.connect(database=server.database)
    raw = MySQLTestDatabase(conn, server.database)
    dash = Dash("mariadb", store, server.dsn, raw)
    sup = run_supervisor(tmp_path, dash, *SLOW_ROLLUP)
    try:
        enqueue_all(store, JOBS_RUN[:8])
        wait_until(lambda: settled(store), timeout=60, message="the first jobs to settle")
        store.close()
        server.stop()
        stopped_at = time.monotonic()
        # Away for longer than a rollup interval: the write of those counts fails, and
        # they are kept for the next one.
        wait_until(lambda: time.monotonic() - stopped_at > 21, timeout=30, interval=0.5,
                   message="a rollup interval")
        sup.wait_event("supervisor_db_error", timeout=30)
        server.start()
        store = dash.store = MySQLStore(config)
        enqueue_all(store, JOBS_RUN[8:])
        wait_until(lambda: settled(store), timeout=60, message="the other jobs to settle")
        sup.signal(signal.SIGTERM)
        assert sup.wait_exit(timeout=30) == 0
    finally:
        sup.kill_all()
        store.close()
    dash.raw = MySQLTestDatabase(server.connect(database=server.database), server.database)
    written = {key: totals[:3] for key, totals in dash.rollup().items()}
    log = "\n".join(sup.log_text().splitlines()[-40:])
    assert written == expected_rollup(dash), log
    assert sum(totals[0] for totals in written.values()) == 10, log
