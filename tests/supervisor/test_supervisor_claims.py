"""claimer = supervisor: the parent claims for all its children and hands each its
jobs over its pipe, and writes the completions they report with its next claim.
What must hold, as in the design where each child claims for itself: every job
runs once and ends done; a child's death gives its running job back charged and
the jobs handed to it uncharged, at once (the lease here is 300 s: a job left
reserved would outlive every wait); reloads and a drain strand no job; a parent
SIGKILLed leaves its claims to its successor, each job run to completion once.
Real supervisors, real signals, real MariaDB (both SQL dialects) and SQLite."""
import os
import signal

import pytest
from conftest import scalar, wait_until
from harness import supervisor_starter, wait_gone

from prefork.jobs import new_job

APPS = "--app", "ledger_app,supervised_app"
CLAIMER = "--claimer", "supervisor"
LONG_LEASE = "--lease-seconds", "300"


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS, *CLAIMER) as start:
        yield start


@pytest.fixture
def enqueue_ledger(store):
    s = store()

    def add(count, prefix, job_type="ledger", payload=None):
        s.enqueue_many([new_job(job_type, payload or {}, key=f"{prefix}{n}")
                        for n in range(count)])
    return add


def count(conn, where):
    return scalar(conn, f"SELECT COUNT(*) FROM prefork_jobs WHERE {where}")


def ledger_rows(conn):
    return scalar(conn, "SELECT COUNT(*) FROM ledger")


def test_the_parent_claims_every_job_and_each_runs_once(supervisor, enqueue_ledger, clean_db):
    """Every claim is in the parent's name (its host:pid); no child claims; each job
    ran once, its effect and completion committed together by its child (ledger),
    and a no-op job's completion is the parent's to write (job_completed from it)."""
    jobs = 300
    sup = supervisor("--workers", "4")
    sup.wait_event("worker_ready", count=4)
    enqueue_ledger(jobs, "l")
    enqueue_ledger(jobs, "n", job_type="noop")
    wait_until(lambda: count(clean_db, "status = 'done'") == 2 * jobs, timeout=60,
               message="every job done")
    assert ledger_rows(clean_db) == jobs
    assert count(clean_db, "attempts = 1 AND crashes = 0") == 2 * jobs
    claimants = {row for (row,) in _rows(clean_db, "SELECT DISTINCT locked_by FROM prefork_jobs")}
    assert claimants == {f"{os.uname().nodename}:{sup.pid}"}, claimants
    noop_ids = {job_id for (job_id,) in _rows(
        clean_db, "SELECT id FROM prefork_jobs WHERE job_type = 'noop'")}
    by_parent = {event["job_id"] for event in sup.events("job_completed") if event["pid"] == sup.pid}
    assert noop_ids <= by_parent, "the parent writes a plain success's completion"
    assert not sup.events("job_handed_back") and not sup.events("worker_fatal")


def test_a_killed_childs_jobs_come_back_at_once(supervisor, enqueue_ledger, clean_db):
    """SIGKILL a child with a job running and more handed to it: the running one comes
    back charged (a crash), the handed ones uncharged, long before the 300 s lease,
    and every job ends done once."""
    jobs = 400
    sup = supervisor("--workers", "2", *LONG_LEASE)
    sup.wait_event("worker_ready", count=2)
    enqueue_ledger(jobs, "s", job_type="sleep", payload={"seconds": 0.01})   # 5 in a hand
    victim = sup.wait_event("job_claimed", timeout=30)[0]["pid"]
    sup.wait_event("job_claimed", count=20, pid=victim, timeout=30)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: count(clean_db, "status = 'done'") == jobs, timeout=60,
               message="every job done (one left reserved would wait 300 s)")
    handed_back = sup.events("job_handed_back")
    assert handed_back, "the killed child's jobs were given back"
    assert sum(event["charged"] for event in handed_back) <= 1
    assert count(clean_db, "attempts = 1") >= jobs - 1


def test_reloads_and_a_drain_strand_no_handed_job(supervisor, enqueue_ledger, clean_db):
    """Reloads in quick succession roll every child over, each stopped with jobs in
    hand; then SIGTERM drains. Once the supervisor has exited, no job is reserved;
    a second supervisor finishes the rest, every effect written once."""
    jobs = 200
    sup = supervisor("--workers", "3", *LONG_LEASE)
    sup.wait_event("worker_ready", count=3)
    enqueue_ledger(jobs, "r", job_type="ledger")
    enqueue_ledger(jobs, "z", job_type="sleep", payload={"seconds": 0.01})
    sup.wait_event("job_claimed", timeout=30)
    for generation in range(1, 6):
        sup.signal(signal.SIGHUP)
        sup.wait_event("config_reloaded", generation=generation)
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(timeout=60) == 0
    assert count(clean_db, "status = 'reserved'") == 0, "a stopped supervisor holds nothing"
    # Each success is logged job_completed once, as its worker would have, whoever
    # wrote it and when (with a claim, alone, or as its child exited mid-drain).
    completed = [e["job_id"] for e in sup.events("job_completed")]
    assert len(completed) == len(set(completed)) == count(clean_db, "status = 'done'")
    assert not sup.events("job_completed_by_supervisor")
    successor = supervisor("--workers", "3", *LONG_LEASE, name="successor")
    wait_until(lambda: count(clean_db, "status = 'done'") == 2 * jobs, timeout=90,
               message="every job done")
    assert ledger_rows(clean_db) == jobs
    assert not successor.events("worker_fatal")


def test_a_success_written_as_its_child_is_reaped_is_logged_as_its_worker_would(
        supervisor, enqueue_ledger, clean_db):
    """The parent, stopped while its draining child ends its job and exits, reads the
    child's `idle` and its exit in one pass, and writes the completion as it reaps the
    child: logged job_completed, as a worker logs a success, not as a dead worker's job."""
    sup = supervisor("--workers", "1", *LONG_LEASE)
    sup.wait_event("worker_ready")
    enqueue_ledger(1, "reaped", job_type="sleep", payload={"seconds": 1})
    job_id = sup.wait_event("job_claimed")[0]["job_id"]
    child = sup.children()[0].pid
    sup.signal(signal.SIGTERM)
    sup.wait_event("supervisor_stopping")
    os.kill(sup.pid, signal.SIGSTOP)
    try:
        wait_gone([child], timeout=10)   # exited, not reaped: its parent is stopped
    finally:
        os.kill(sup.pid, signal.SIGCONT)
    assert sup.wait_exit(timeout=30) == 0
    assert count(clean_db, "status = 'done'") == 1
    assert sup.events("job_completed", job_id=job_id)
    assert not sup.events("job_completed_by_supervisor")


def test_a_killed_parents_claims_go_to_its_successor(supervisor, enqueue_ledger, clean_db):
    """SIGKILL the parent while its children run and hold jobs: they stop (their parent
    is gone), and the claims left reserved in its name come back by lease; a new
    supervisor runs every job to completion once."""
    jobs = 150
    doomed = supervisor("--workers", "3", "--lease-seconds", "3")
    doomed.wait_event("worker_ready", count=3)
    children = [child.pid for child in doomed.children()]
    enqueue_ledger(jobs, "k", job_type="ledger")
    doomed.wait_event("job_claimed", timeout=30)
    doomed.proc.kill()
    doomed.proc.wait(5)
    wait_gone(children, timeout=10)
    successor = supervisor("--workers", "3", name="successor")
    wait_until(lambda: count(clean_db, "status = 'done'") == jobs, timeout=90,
               message="every job done after the parent's death")
    assert ledger_rows(clean_db) == jobs
    assert not successor.events("worker_fatal")


def test_max_items_recycles_children_that_are_handed_their_jobs(
        supervisor, enqueue_ledger, clean_db):
    """A child runs at most max-items jobs, however many the parent could hand it,
    and its successor takes over: every job done once."""
    jobs = 60
    sup = supervisor("--workers", "2", "--max-items", "7")
    sup.wait_event("worker_ready", count=2)
    enqueue_ledger(jobs, "m", job_type="ledger")
    wait_until(lambda: count(clean_db, "status = 'done'") == jobs, timeout=90,
               message="every job done")
    per_child = {}
    for event in sup.events("job_claimed"):
        per_child[event["pid"]] = per_child.get(event["pid"], 0) + 1
    assert max(per_child.values()) <= 7, per_child
    assert len(per_child) >= jobs // 7
    assert ledger_rows(clean_db) == jobs


def test_sqlite_the_parent_claims_and_every_job_runs_once(tmp_path, sqlite_migrated,
                                                          sqlite_store, sqlite_db):
    jobs = 150
    sqlite_store().enqueue_many([new_job("ledger", {}, key=f"q{n}") for n in range(jobs)])
    with supervisor_starter(tmp_path, sqlite_migrated, *APPS, *CLAIMER) as start:
        sup = start("--workers", "3")
        wait_until(lambda: sqlite_db.scalar(
            "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'") == jobs, timeout=60,
            message="every job done")
        assert sqlite_db.scalar("SELECT COUNT(*) FROM ledger") == jobs
        assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE attempts = 1") == jobs
        assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE locked_by = %s",
                                [f"{os.uname().nodename}:{sup.pid}"]) == jobs


def _rows(conn, sql):
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()
