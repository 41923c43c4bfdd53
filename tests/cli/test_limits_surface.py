"""Limits as a user sees them, on SQLite and on MariaDB: a concurrency key given to
`prefork-queue enqueue` (flag and --file lines), to a Client and to a handler's
Task; what `status` says of the limited groups (text and JSON); the metrics'
limit gauges, scraped over HTTP from the real metrics server. Bad input is one
line, exit 2, nothing enqueued."""
import json
import socket
import urllib.request

import pytest
from cli_checks import assert_refused
from conftest import run_cli
from prometheus_client.parser import text_string_to_metric_families

import prefork
from prefork import client as client_module
from prefork import config as config_module
from prefork import registry
from prefork.jobs import new_job
from prefork.limits.rules import LimitRule, Rate
from prefork.observers.metrics import MAX_LIMIT_GROUPS, Metrics

WORKER = f"{socket.gethostname()}:1"   # SQLite warns of a job held by another host's
REPORT = LimitRule("report.build", concurrency=2, rate=Rate(100, 60))


@pytest.fixture
def s(backend_store):
    return backend_store()


def job_count(db):
    return db.scalar("SELECT COUNT(*) FROM prefork_jobs")


def limited_jobs(store, key_counts, claims=0):
    """report.build jobs under REPORT: key_counts {key ('': none): jobs}; then a limited
    claim of up to `claims` of them (a new group starts with one token: one a group).
    (the ids enqueued, the jobs claimed)."""
    store.publish_limits([REPORT], ["report.build"])
    ids = [store.enqueue(new_job("report.build", {"n": n}, concurrency_key=key or None))
           for key, count in key_counts.items() for n in range(count)]
    if not claims:
        return ids, []
    claimed, _ = store.claim_limited(["default"], WORKER, 60, claims, None,
                                     {"report.build": REPORT})
    return ids, claimed


# -- enqueue with a concurrency key --------------------------------------------------------

def test_enqueue_stores_the_concurrency_key_from_the_flag_and_the_file(queue_dsn, s, db,
                                                                       tmp_path):
    result = run_cli("enqueue", "report.build", '{"account": 7}', "--concurrency-key",
                     "account-7", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    row = db.row(int(result.stdout))
    assert row["concurrency_key"] == "account-7"
    plain = int(run_cli("enqueue", "report.build", dsn=queue_dsn).stdout)
    assert db.row(plain)["concurrency_key"] == ""   # '' = no key
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join(json.dumps(line) for line in (
        {"type": "report.build", "payload": {"n": 1}, "concurrency_key": "account-8"},
        {"type": "report.build", "payload": {"n": 2}})) + "\n")
    from_file = run_cli("enqueue", "--file", str(jobs), dsn=queue_dsn)
    assert from_file.returncode == 0, from_file.stderr
    keys = [db.row(job_id)["concurrency_key"] for job_id in (plain + 1, plain + 2)]
    assert keys == ["account-8", ""] and job_count(db) == 4


@pytest.mark.parametrize("key,words", [
    (" account-7", ["concurrency key", "whitespace"]),
    ("account\t7", ["concurrency key", "control characters"]),
    ("k" * 192, ["concurrency key", "1-191 characters"]),
    ("", ["concurrency key", "1-191 characters"]),
])
def test_a_bad_concurrency_key_is_one_line_and_enqueues_nothing(queue_dsn, db, tmp_path,
                                                                key, words):
    assert_refused(run_cli("enqueue", "report.build", "--concurrency-key", key, dsn=queue_dsn),
                   *words)
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"type": "report.build"}) + "\n"
                    + json.dumps({"type": "report.build", "concurrency_key": key}) + "\n")
    assert_refused(run_cli("enqueue", "--file", str(jobs), dsn=queue_dsn),
                   "jobs.jsonl:2", *words)
    assert job_count(db) == 0


def test_the_flag_with_a_file_is_refused(queue_dsn, db, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"type": "report.build"}) + "\n")
    assert_refused(run_cli("enqueue", "--file", str(jobs), "--concurrency-key", "k",
                           dsn=queue_dsn), "--concurrency-key", "concurrency_key")
    assert job_count(db) == 0


def test_a_client_and_a_task_enqueue_with_a_concurrency_key(queue_dsn, db):
    config = config_module.load({"dsn": queue_dsn}, environ={})
    with prefork.Client(config=config) as client:
        one = client.enqueue("report.build", {"n": 1}, concurrency_key="account-1")
        assert client.enqueue_many("report.build", [{"n": 2}, {"n": 3}],
                                   concurrency_key="account-2") == 2
        task = registry.Task("report.build", lambda job: None)
        previous = client_module.set_default_client(client)
        try:
            by_task = task.enqueue({"n": 4}, concurrency_key="account-3")
        finally:
            client_module.set_default_client(previous)
    assert db.row(one)["concurrency_key"] == "account-1"
    assert db.row(by_task)["concurrency_key"] == "account-3"
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE concurrency_key = %s",
                     ("account-2",)) == 2


def test_work_publishes_its_limits_and_runs_limited_jobs(queue_dsn, s, db, tmp_path):
    log = tmp_path / "runs.log"
    jobs = [s.enqueue(new_job("limited.pair", {"log": str(log), "key": "k"},
                              concurrency_key="k")) for _ in range(3)]
    assert [db.row(job_id)["limited"] for job_id in jobs] == [0, 0, 0]   # no rule yet
    result = run_cli("work", "--app", "limits_app", "--stop-when-empty", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert db.scalar("SELECT concurrency FROM prefork_limits WHERE job_type = %s",
                     ("limited.pair",)) == 2
    assert [db.row(job_id)["status"] for job_id in jobs] == ["done"] * 3
    assert [db.row(job_id)["limited"] for job_id in jobs] == [1, 1, 1]
    assert log.read_text().count("start ") == 3


# -- status --------------------------------------------------------------------------------

def test_status_lists_each_limited_group_running_and_waiting(queue_dsn, s):
    _, claimed = limited_jobs(s, {"account-7": 3, "": 1}, claims=4)
    assert len(claimed) == 2   # one token a new group
    result = run_cli("status", "--json", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(result.stdout)["limits"], key=lambda g: g["key"]) == [
        {"type": "report.build", "key": "", "running": 1, "limit": 2, "rate": "100/m",
         "waiting": 0},
        {"type": "report.build", "key": "account-7", "running": 1, "limit": 2,
         "rate": "100/m", "waiting": 2}]
    text = run_cli("status", dsn=queue_dsn).stdout.splitlines()
    start = text.index("LIMITS")
    assert text[start + 1].split() == ["TYPE", "KEY", "RUNNING", "LIMIT", "RATE", "WAITING"]
    assert sorted(line.split() for line in text[start + 2:]) == [
        ["report.build", "(none)", "1", "2", "100/m", "0"],
        ["report.build", "account-7", "1", "2", "100/m", "2"]]


def test_status_has_no_limits_section_without_limited_jobs(queue_dsn, s):
    s.enqueue(new_job("mail.send"))
    result = run_cli("status", dsn=queue_dsn)
    assert result.returncode == 0 and "LIMITS" not in result.stdout
    assert json.loads(run_cli("status", "--json", dsn=queue_dsn).stdout)["limits"] == []


# -- metrics -------------------------------------------------------------------------------

class StoreView:
    """The part of observers.SupervisorView the metrics' sample reads, from a real
    store, as the supervisor's upkeep gives it."""

    def __init__(self, store):
        self.store = store
        self.queues = ["default"]
        self.workers_alive = self.workers_target = 0

    def running_jobs(self):
        return []

    def queue_stats(self, queues):
        return self.store.queue_stats(queues)

    def limit_usage(self):
        return self.store.limit_usage()

    def workflow_states(self):
        return self.store.workflow_states()


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


@pytest.fixture
def metrics():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    served = Metrics(f"127.0.0.1:{port}")
    yield served, port
    served.close()


def test_the_limit_gauges_show_each_group_and_drop_those_gone(metrics, s):
    served, port = metrics
    ids, claimed = limited_jobs(s, {"account-7": 3}, claims=1)
    served.tick(0.0, StoreView(s))
    samples = scrape(port)
    labels = (("key", "account-7"), ("type", "report.build"))
    assert samples[("prefork_limit_running", labels)] == 1
    assert samples[("prefork_limit_waiting", labels)] == 2
    assert samples[("prefork_limit_concurrency", labels)] == 2
    assert samples[("prefork_limit_groups", ())] == 1
    assert samples[("prefork_queue_jobs", (("queue", "default"), ("state", "cancelled")))] == 0
    s.cancel([job_id for job_id in ids if job_id not in {job.id for job in claimed}])
    for job in claimed:
        assert s.complete(job)
    served.tick(served.next_deadline(), StoreView(s))
    samples = scrape(port)
    assert ("prefork_limit_running", labels) not in samples
    assert samples[("prefork_limit_groups", ())] == 0
    assert samples[("prefork_queue_jobs", (("queue", "default"), ("state", "cancelled")))] == 2


def test_the_limit_gauges_are_bounded_however_many_keys(metrics, s):
    served, port = metrics
    keys = {f"account-{n}": 1 + (n == 7) for n in range(MAX_LIMIT_GROUPS + 20)}
    limited_jobs(s, keys)
    served.tick(0.0, StoreView(s))
    samples = scrape(port)
    shown = {dict(labels)["key"] for name, labels in samples if name == "prefork_limit_waiting"}
    assert len(shown) == MAX_LIMIT_GROUPS and "account-7" in shown   # the busiest is shown
    assert samples[("prefork_limit_groups", ())] == MAX_LIMIT_GROUPS + 20
