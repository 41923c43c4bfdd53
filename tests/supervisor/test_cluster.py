"""Two supervisors on one database, as two hosts would run them (issue 6)."""
import json
import os
import signal
import time

import pytest
from conftest import job_row, run_cli, scalar, wait_until
from harness import supervisor_starter, wait_gone

from prefork.jobs import new_job

APPS = ("--app", "ledger_app,supervised_app")
FAST_REGISTRY = ("--heartbeat-interval", "0.3", "--supervisor-timeout", "2")


@pytest.fixture
def supervisors(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS, *FAST_REGISTRY) as start:
        yield start


@pytest.fixture
def enqueue(store):
    s = store()
    return lambda job_type, payload=None, **kw: s.enqueue(new_job(job_type, payload or {}, **kw))


def status(dsn):
    result = run_cli("status", "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_status_shows_every_supervisor_and_what_its_workers_do(supervisors, enqueue, migrated):
    job_id = enqueue("slow_ledger", {"seconds": 5}, key="seen")
    first = supervisors("--workers", "2")
    second = supervisors("--workers", "1", "--queues", "mail")
    first.wait_event("job_claimed", job_id=job_id)

    def both_reported():
        report = status(migrated)
        pids = {sup["pid"]: sup for sup in report["supervisors"]}
        busy = [c for sup in pids.values() for c in sup["children"] if c.get("job_id") == job_id]
        return report if {first.pid, second.pid} <= set(pids) and busy else None

    report = wait_until(both_reported, timeout=30)
    by_pid = {sup["pid"]: sup for sup in report["supervisors"]}
    assert by_pid[second.pid]["queues"] == ["mail"] and by_pid[first.pid]["workers"] == 2
    assert report["queues"]["default"]["reserved"] == 1
    text = run_cli("status", dsn=migrated).stdout
    assert f"busy job {job_id} slow_ledger" in text and "SUPERVISORS" in text


def test_a_killed_supervisor_is_pruned_and_its_jobs_come_back_before_their_leases(
        supervisors, enqueue, clean_db):
    ids = [enqueue("slow_ledger", {"seconds": 60}, key=f"held{n}") for n in range(2)]
    doomed = supervisors("--workers", "2", "--lease-seconds", "300")
    for job_id in ids:
        doomed.wait_event("job_claimed", job_id=job_id)
    children = [child.pid for child in doomed.children()]
    os.killpg(doomed.pid, signal.SIGKILL)   # the whole host at once: parent and children
    wait_gone([doomed.pid] + children)
    survivor = supervisors("--workers", "2", "--lease-seconds", "300")
    # Handed back by the prune (the 300 s leases are far from expiring: these waits
    # are bounded well under them), not by lease recovery.
    pruned = survivor.wait_event("supervisor_pruned", timeout=30)[0]
    assert pruned["jobs_handed_back"] == 2
    rows = wait_until(lambda: [job_row(clean_db, job_id) for job_id in ids]
                      if all(job_row(clean_db, j)["attempts"] == 2 for j in ids) else None,
                      timeout=30, message="both jobs claimed again")
    assert not survivor.events("leases_recovered")
    assert all(row["status"] == "reserved" for row in rows)


def test_restart_replaces_workers_started_before_it_on_every_host(supervisors, migrated):
    first = supervisors("--workers", "2")
    second = supervisors("--workers", "2")
    old = {child.pid for sup in (first, second) for child in sup.wait_children(2)}
    time.sleep(0.05)   # the request must come after the children started
    result = run_cli("restart", dsn=migrated)
    assert result.returncode == 0 and "restart requested" in result.stdout

    def all_replaced():
        now = {child.pid for sup in (first, second) for child in sup.children()}
        return now if len(now) == 4 and not now & old else None

    fresh = wait_until(all_replaced, timeout=20, message="every old worker replaced")
    for sup in (first, second):
        assert {e["reason"] for e in sup.events("worker_recycled")} == {"restart"}
    time.sleep(1.5)   # a few poll intervals: the new workers are left alone
    assert {child.pid for sup in (first, second) for child in sup.children()} == fresh


def test_a_paused_queue_waits_and_resumes(supervisors, enqueue, migrated, clean_db):
    assert run_cli("pause", "mail", dsn=migrated).returncode == 0
    supervisors("--workers", "2", "--queues", "mail")
    job_id = enqueue("slow_ledger", {"seconds": 0}, key="paused", queue="mail")
    time.sleep(1.5)   # three poll intervals: long enough for a claim that must not happen
    assert job_row(clean_db, job_id)["status"] == "ready"
    assert status(migrated)["queues"]["mail"]["paused"] is True
    assert run_cli("resume", "mail", dsn=migrated).returncode == 0
    wait_until(lambda: job_row(clean_db, job_id)["status"] == "done", timeout=15)
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 1
