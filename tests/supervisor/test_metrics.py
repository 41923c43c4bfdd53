"""Prometheus metrics: the real supervisor serving them, scraped over HTTP, and the
store's queue figures on every backend."""
import signal
import socket
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import psutil
import pytest
from conftest import run_cli, wait_until
from harness import supervisor_starter
from prometheus_client.parser import text_string_to_metric_families

import prefork
from prefork.errors import UserError
from prefork.jobs import new_job
from prefork.limits.rules import LimitRule
from prefork.observers.metrics import parse_address, reason_label
from prefork.retry import Decision
from prefork.store.mysql import bench as mysql_bench, store as mysql_backend
from prefork.store.sqlite import store as sqlite_backend
from prefork.workflows.plan import plan_flow

APP = ("--app", "prefork.examples")
WORKER = "test-host:1"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Scrape:
    """One scrape of the endpoint: sample values by name and labels."""

    def __init__(self, port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            self.text = response.read().decode()
        self.samples = {(sample.name, frozenset(sample.labels.items())): sample.value
                        for family in text_string_to_metric_families(self.text)
                        for sample in family.samples}

    def value(self, name, **labels):
        return self.samples.get((name, frozenset(labels.items())))

    def total(self, name):
        return sum(value for (sample, _), value in self.samples.items() if sample == name)


def scrape_when(port, predicate, message, timeout=20):
    def attempt():
        try:
            scrape = Scrape(port)
        except (urllib.error.URLError, ConnectionError):
            return None
        return scrape if predicate(scrape) else None
    return wait_until(attempt, timeout=timeout, interval=0.1, message=message)


def listening_ports(pid):
    return {conn.laddr.port for conn in psutil.Process(pid).net_connections(kind="inet")
            if conn.status == psutil.CONN_LISTEN}


def make_dead(store, job_type="fail-n-times", queue="default"):
    store.enqueue(new_job(job_type, {}, queue=queue))
    job = store.claim([queue], WORKER, 30)[0]
    assert store.fail(job, "PlannedFailure", Decision(dead=True, delay=0))


# -- the endpoint of the real supervisor ------------------------------------------------

@pytest.fixture
def started(tmp_path, sqlite_migrated):
    """start(*args) -> SupervisorProcess on the test's SQLite file, killed at the end."""
    with supervisor_starter(tmp_path, sqlite_migrated, *APP) as start:
        yield start


def test_metrics_count_what_the_supervisor_saw(started, sqlite_store):
    s = sqlite_store()
    s.enqueue(new_job("sleep", {"seconds": 1}, delay=3600))   # delayed
    make_dead(s)                                                # dead before the start
    port = free_port()
    sup = started("--workers", "2", "--retry-base", "0.05", "--metrics-address",
                  f"127.0.0.1:{port}")
    # The first read of the queue figures may come before the workers, or find the
    # database busy (it is tried again a second later): wait for both.
    first = scrape_when(port, lambda m: m.value("prefork_workers_alive") == 2
                        and m.value("prefork_queue_sampled_timestamp_seconds"),
                        "2 workers alive and the queue figures read")
    assert first.value("prefork_workers_target") == 2
    assert_queue_figures(first, ready=0, delayed=1, reserved=0, dead=1)
    assert_serving_from_the_parent_only(sup, port)
    assert_job_outcomes_counted(s, port)
    assert_a_killed_child_counts_as_a_crash(s, sup, port)
    # Queue figures are read at most every 15 s, not at each scrape.
    assert Scrape(port).value("prefork_queue_sampled_timestamp_seconds") == \
        first.value("prefork_queue_sampled_timestamp_seconds")


def assert_queue_figures(scrape, **expected):
    got = {state: scrape.value("prefork_queue_jobs", queue="default", state=state)
           for state in expected}
    assert got == expected
    assert scrape.value("prefork_queue_oldest_ready_age_seconds", queue="default") == 0


def assert_serving_from_the_parent_only(sup, port):
    assert port in listening_ports(sup.pid)
    for child in sup.wait_children(2):
        assert port not in listening_ports(child.pid), "a child holds the metrics port"
    assert sup.events("metrics_serving")[0]["address"] == f"127.0.0.1:{port}"


def assert_job_outcomes_counted(s, port):
    for _ in range(3):
        s.enqueue(new_job("sleep", {"seconds": 0.1}))
    s.enqueue(new_job("fail-n-times", {"times": 1}))                   # retry, then done
    s.enqueue(new_job("fail-n-times", {"times": 9}, max_attempts=1))   # dead
    s.enqueue(new_job("no-such-handler", {}))                           # dead: unknown type
    scrape = scrape_when(port, lambda m: m.total("prefork_jobs_total") == 7, "7 finished jobs")
    jobs = {(labels["type"], labels["outcome"]): value
            for (name, label_set), value in scrape.samples.items()
            if name == "prefork_jobs_total" for labels in [dict(label_set)]}
    assert jobs == {("sleep", "done"): 3, ("fail-n-times", "retry"): 1,
                    ("fail-n-times", "done"): 1, ("fail-n-times", "dead"): 1,
                    ("(unknown)", "dead"): 1}
    sleep = {"queue": "default", "type": "sleep"}
    assert scrape.value("prefork_job_duration_seconds_count", **sleep) == 3
    assert scrape.value("prefork_job_duration_seconds_bucket", le="0.05", **sleep) == 0
    assert scrape.value("prefork_job_duration_seconds_bucket", le="2.5", **sleep) == 3
    assert 0.3 <= scrape.value("prefork_job_duration_seconds_sum", **sleep) < 7.5
    assert scrape.value("prefork_job_duration_seconds_count", queue="default",
                        type="fail-n-times") == 3


def assert_a_killed_child_counts_as_a_crash(s, sup, port):
    job_id = s.enqueue(new_job("sleep", {"seconds": 60}))
    pid = sup.wait_event("job_claimed", job_id=job_id)[0]["pid"]
    running = scrape_when(port, lambda m: m.value("prefork_jobs_in_progress", queue="default",
                                                  type="sleep") == 1, "a running sleep job")
    assert running.value("prefork_worker_exits_total", reason="crash") is None
    psutil.Process(pid).kill()
    after = scrape_when(port, lambda m: m.value("prefork_worker_exits_total", reason="crash") == 1
                        and m.value("prefork_workers_alive") == 2, "a crash and a replacement")
    assert after.total("prefork_worker_exits_total") == 1
    assert after.total("prefork_jobs_total") == 7   # the killed job did not finish


def test_cancelled_jobs_and_limit_groups_are_exported(started, sqlite_store):
    s = sqlite_store()
    # A type this supervisor does not handle: its published limit stays, its jobs wait.
    s.publish_limits([LimitRule("report.build", concurrency=2)], ["report.build"])
    for n in range(2):
        s.enqueue(new_job("report.build", {"n": n}, concurrency_key="account-7"))
    s.cancel([s.enqueue(new_job("sleep", {"seconds": 60}))])
    port = free_port()
    sup = started("--workers", "1", "--metrics-address", f"127.0.0.1:{port}")
    group = {"type": "report.build", "key": "account-7"}
    first = scrape_when(port, lambda m: m.value("prefork_limit_waiting", **group) == 2,
                        "the limited group's waiting jobs")
    assert first.value("prefork_limit_running", **group) == 0
    assert first.value("prefork_limit_concurrency", **group) == 2
    assert first.value("prefork_limit_groups") == 1
    assert first.value("prefork_queue_jobs", queue="default", state="cancelled") == 1
    running = s.enqueue(new_job("sleep", {"seconds": 60}))
    sup.wait_event("job_claimed", job_id=running)
    assert s.cancel([running]).stopping == [running]
    stopped = scrape_when(port, lambda m: m.value("prefork_jobs_total", queue="default",
                                                  type="sleep", outcome="cancelled") == 1,
                          "the running job counted cancelled")
    assert stopped.total("prefork_jobs_total") == 1
    assert s.get(running)["status"] == "cancelled"


def test_workflows_are_counted_by_state(started, sqlite_store):
    """Outermost workflows running and stopped by a dead member; a nested one, a done
    one and waiting jobs are not workflows to count."""
    s = sqlite_store()
    waiting = prefork.job("report.build", {}, queue="other")   # nobody claims it here
    s.enqueue_workflow(plan_flow(prefork.chain(prefork.group([waiting]), waiting)))
    stopped = s.enqueue_workflow(plan_flow(prefork.chain(prefork.job("sleep", {}), waiting)))
    [first] = s.claim(["default"], WORKER, 30, limit=1)
    assert first.id == stopped.job_ids[0] and s.fail(first, "Boom", Decision(True, 0.0))
    port = free_port()
    started("--workers", "1", "--metrics-address", f"127.0.0.1:{port}",
            "--queues", "nothing-here")
    scrape = scrape_when(port, lambda m: m.value("prefork_workflows", state="dead") == 1,
                         "the stopped workflow counted")
    assert scrape.value("prefork_workflows", state="running") == 1
    assert scrape.value("prefork_workflows", state="cancelled") == 0


def test_no_endpoint_without_a_metrics_address(started):
    sup = started("--workers", "1")
    sup.wait_event("worker_ready")
    assert listening_ports(sup.pid) == set()
    assert sup.events("metrics_serving") == []


def test_exits_of_every_reason_are_labelled(started, sqlite_store):
    port = free_port()
    sup = started("--workers", "1", "--max-items", "1", "--metrics-address", f"localhost:{port}")
    sqlite_store().enqueue(new_job("sleep", {"seconds": 0}))
    scrape_when(port, lambda m: m.value("prefork_worker_exits_total", reason="max-items") == 1,
                "a max-items recycle")
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit() == 0
    assert sup.events("supervisor_stopped")


@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1", "127.0.0.1:99999",
                                     "127.0.0.1:0", ":9187", "127.0.0.1:http",
                                     "no-such-host.invalid:9187"])
def test_a_bad_address_is_a_one_line_error(sqlite_migrated, address):
    result = run_cli("run", *APP, "--metrics-address", address, dsn=sqlite_migrated)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "metrics" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_port_is_a_one_line_error(sqlite_migrated):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = run_cli("run", *APP, "--metrics-address", address, dsn=sqlite_migrated)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"cannot serve metrics at {address}" in result.stderr


# -- pieces -------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:9187", ("127.0.0.1", 9187)), ("localhost:80", ("localhost", 80)),
    ("[::1]:9187", ("::1", 9187)), (" 0.0.0.0:9187 ", ("0.0.0.0", 9187))])
def test_addresses_parse(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["9187", "host:", "host:port", "[::1]", "a:1/x", "u@h:1"])
def test_bad_addresses_are_refused(text):
    with pytest.raises(UserError, match="metrics_address"):
        parse_address(text)


@pytest.mark.parametrize("reason,label", [
    ("hard timeout after 3s", "timeout"), ("hard timeout after 0.5s", "timeout"),
    ("boot failure", "boot-failure"), ("max-items", "max-items"), ("crash", "crash"),
    ("graceful timeout", "graceful-timeout"), ("quick stop", "quick-stop"),
    ("scale down", "scale-down"), ("reload", "reload")])
def test_exit_reasons_become_bounded_labels(reason, label):
    assert reason_label(reason) == label


# -- the store's queue figures, on every backend -----------------------------------------------

def test_queue_stats_count_live_jobs_per_queue(backend_store):
    s = backend_store()
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    s.enqueue(new_job("noop", run_at=an_hour_ago))
    s.enqueue_many([new_job("noop") for _ in range(3)] + [new_job("noop", delay=600)] * 2)
    s.claim(["default"], WORKER, 30, limit=1)        # the oldest: reserved
    done = s.claim(["default"], WORKER, 30, limit=1)[0]
    assert s.complete(done)                          # done: not counted
    make_dead(s, "noop")                             # one more, then one of them dead
    s.cancel([s.enqueue(new_job("noop"))])           # and one cancelled
    s.enqueue(new_job("noop", queue="other"))        # a queue not asked about
    s.enqueue_workflow(plan_flow(prefork.chain(      # a workflow's step not released yet
        prefork.job("noop", queue="other"), prefork.job("noop"))))
    stats = s.queue_stats(["default", "empty"])
    assert set(stats) == {"default", "empty"}
    default = dict(stats["default"])
    assert 0 <= default.pop("oldest_ready_age") < 60
    assert default == {"ready": 2, "delayed": 2, "reserved": 1, "dead": 1, "cancelled": 1,
                       "waiting": 1}
    assert stats["empty"] == {"ready": 0, "delayed": 0, "reserved": 0, "dead": 0,
                              "cancelled": 0, "waiting": 0, "oldest_ready_age": 0.0}
    assert s.queue_stats([]) == {} and s.ready_count([], 10) == 0


def test_queue_stats_oldest_ready_age(backend_store):
    s = backend_store()
    s.enqueue(new_job("noop", run_at=datetime.now(timezone.utc) - timedelta(hours=1)))
    s.enqueue(new_job("noop", priority=-5))   # claimed first, but younger
    age = s.queue_stats(["default"])["default"]["oldest_ready_age"]
    assert 3590 < age < 3660


def test_mysql_queue_stats_never_read_done_rows(store, clean_db):
    s = store()
    for _ in mysql_bench.bench_fill_done(s, "q1", 20_000, "noop", "{}"):
        pass
    s.enqueue_many([new_job("noop", queue="q1") for _ in range(5)])
    with clean_db.cursor() as cursor:
        cursor.execute("ANALYZE TABLE prefork_jobs")
        cursor.execute("EXPLAIN " + mysql_backend.QUEUE_STATS.format(queues="'q1', 'q2'"))
        names = [column[0] for column in cursor.description]
        plan = [dict(zip(names, row)) for row in cursor.fetchall()]
    assert len(plan) == 1, plan
    assert plan[0]["key"] == "ix_prefork_jobs_claim" and plan[0]["type"] == "range", plan
    assert int(plan[0]["rows"]) < 1000, plan   # the 20,000 done rows are outside the ranges read
    assert "Using index" in (plan[0]["Extra"] or ""), plan   # the index alone answers


def test_sqlite_queue_stats_never_read_done_rows(sqlite_store, sqlite_db):
    sqlite_store().enqueue(new_job("noop", queue="q1"))
    sqlite_db.execute("ANALYZE")
    plan = [row[3] for row in sqlite_db.conn.execute(
        "EXPLAIN QUERY PLAN " + sqlite_backend.QUEUE_STATS.format(queues=":a, :b"),
        {"a": "q1", "b": "q2", "now": "2999-01-01 00:00:00.000000"})]
    assert any("COVERING INDEX ix_prefork_jobs_claim (status=? AND queue=?)" in line
               for line in plan), plan
    assert not any(line.startswith("SCAN") for line in plan), plan
