"""Fork per job (--max-items 1): a fresh process per job, with the recycling of the
pool overlapped. A child that retires gets its successor forked and connected first,
within the spares (decisions.spares: one per four workers), and each new child sets
its session up in two round trips. Real supervisors, real processes, real MariaDB
(both SQL dialects), a counting proxy in front of the server for the round trips."""
import os
import signal
import threading

import psutil
import pytest
from conftest import SERVER, scalar, wait_until
from harness import supervisor_starter
from query_tap import QueryTap

from prefork.jobs import new_job
from prefork.supervisor import decisions

APPS = "--app", "ledger_app,supervised_app"


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS) as start:
        yield start


@pytest.fixture
def enqueue_many(store):
    s = store()

    def add(count, prefix):
        s.enqueue_many([new_job("slow_ledger", {"seconds": 0}, key=f"{prefix}{i}")
                        for i in range(count)])
    return add


class ProcessCount:
    """Samples the supervisor's process tree (psutil) in a thread: the most children
    it ever had."""

    def __init__(self, pid):
        self.parent = psutil.Process(pid)
        self.peak = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while not self.stopped.is_set():
            try:
                self.peak = max(self.peak, len(self.parent.children()))
            except psutil.NoSuchProcess:
                return
            self.stopped.wait(0.002)

    def stop(self):
        self.stopped.set()
        self.thread.join()
        return self.peak


def test_every_job_runs_once_in_a_fresh_process_within_workers_plus_spares(
        supervisor, enqueue_many, clean_db):
    workers, jobs = 8, 120
    spares = decisions.spares(workers)
    assert spares == 2
    sup = supervisor("--workers", str(workers), "--max-items", "1")
    sup.wait_event("worker_ready", count=workers)
    count = ProcessCount(sup.pid)
    enqueue_many(jobs, "f")
    wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM ledger") == jobs, timeout=120,
               message=f"{jobs} ledger rows")
    peak = count.stop()
    assert peak <= workers + spares, f"{peak} children at once"
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'"
                  " AND attempts = 1 AND crashes = 0") == jobs
    pids = [event["pid"] for event in sup.events("job_claimed")]
    assert len(pids) == jobs and len(set(pids)) == jobs, "one process per job"
    assert not sup.events("worker_fatal") and not sup.events("job_handed_back")


def test_a_child_with_a_successor_goes_only_once_that_one_is_ready(supervisor, enqueue_many,
                                                                   clean_db):
    """Successors are forked (within the spares) for children that start their last
    job; a child that has one exits after it said it is ready, in its slot."""
    sup = supervisor("--workers", "4", "--max-items", "1")
    sup.wait_event("worker_ready", count=4)
    enqueue_many(20, "s")
    wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 20, timeout=60,
               message="20 ledger rows")
    recycled = sup.wait_event("worker_recycled", count=16)
    log = sup.events()
    ready = {event["pid"]: log.index(event) for event in sup.events("worker_ready")}
    successor = {event["replaces"]: event["pid"] for event in sup.events("worker_spawned")
                 if "replaces" in event}
    for event in recycled:
        exited = sup.events("worker_exited", pid=event["pid"])[0]
        assert exited["reason"] == "max-items" and exited["status"] == "exit code 0"
        if event["pid"] in successor:
            assert ready[successor[event["pid"]]] < log.index(exited), \
                f"{event['pid']} exited before its successor was ready"
    handovers = len(set(successor) & {event["pid"] for event in recycled})
    assert handovers, "no child handed over to a successor"


@pytest.mark.parametrize("dialect", ["mariadb", "mysql"], indirect=True)
def test_a_child_handed_its_job_never_connects_and_one_that_claims_sets_up_in_one_round_trip(
        tmp_path, migrated, clean_db, dialect, store):
    """Counted at the wire. Jobs waiting at the start: the parent claims each child's
    job before forking it and writes its completion, so those children open no
    session at all (none reported, none more at the proxy than the parent's and the
    reported ones'). Once the queue is empty, a child is forked without a job and
    claims for itself: its commands before its first claim are one script, the
    driver's SET NAMES in it; no schema read, no SELECT CONNECTION_ID()."""
    jobs = 6
    store().enqueue_many([new_job("noop", key=f"h{i}") for i in range(jobs)])
    database = migrated.rsplit("/", 1)[1]
    with QueryTap(SERVER["host"], SERVER["port"]) as tap:
        dsn = f"mysql://{SERVER['user']}@127.0.0.1:{tap.port}/{database}"
        with supervisor_starter(tmp_path, dsn, *APPS) as start:
            sup = start("--workers", "2", "--max-items", "1")
            wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs"
                                      " WHERE status = 'done'") == jobs, timeout=60,
                       message=f"{jobs} jobs done")
            ready = sup.wait_event("worker_ready", count=jobs + 2)
            sessions = len(tap.sessions)
        connection = {event["pid"]: event["connection"] for event in ready}
        ran = [event["pid"] for event in sup.events("job_claimed")]
        assert len(ran) == jobs and not any(connection[pid] for pid in ran), connection
        written = sup.wait_event("job_completed_by_supervisor", count=jobs, why="forked per job")
        assert len(written) == jobs
        claimers = [event for event in ready if event["connection"] is not None]
        assert claimers, "no child was forked without a job once the queue was empty"
        assert sessions == 1 + len(claimers), f"{sessions} sessions: the parent's and {claimers}"
        for event in claimers:
            commands = tap.commands(event["connection"])
            first_claim = next(index for index, (_, sql) in enumerate(commands)
                               if "prefork_jobs" in sql)
            set_up = [sql for _, sql in commands[:first_claim]]
            assert len(set_up) == 1, f"child {event['pid']} set itself up with {set_up}"
            assert set_up[0].startswith("SET NAMES utf8mb4;"), set_up
            assert not any("prefork_schema_migrations" in sql or "CONNECTION_ID" in sql
                           for sql in set_up)


def test_a_handed_job_that_fails_is_recorded_and_retried_by_the_child_that_ran_it(
        supervisor, store, clean_db):
    """A handed child that needs the database (a failure to record, an effect to
    commit with the completion) opens its own session then."""
    store().enqueue_many([new_job("flaky", {"succeed_on": 2}, key=f"f{i}") for i in range(4)])
    sup = supervisor("--workers", "2", "--max-items", "1", "--retry-base", "0.05")
    wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 4, timeout=60,
               message="4 ledger rows")
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'"
                  " AND attempts = 2") == 4
    failed = sup.wait_event("job_failed", count=4)
    assert len(failed) == 4 and all("ConnectionResetError" in event["error"] for event in failed)
    for event in failed:   # its child said it was ready with its job's start, unconnected
        assert sup.wait_event("worker_ready", pid=event["pid"])[0]["connection"] is None


def test_a_handed_child_killed_mid_job_gives_its_job_back_to_run_again(
        supervisor, store, clean_db, tmp_path):
    """The parent claimed the job and the child dies running it: the job goes back,
    charged with the crash, and runs again in a new child; nothing runs twice at once."""
    log, release = tmp_path / "tally.log", tmp_path / "release"
    store().enqueue(new_job("tally", {"log": str(log), "until": str(release)}, key="k"))
    sup = supervisor("--workers", "1", "--max-items", "1")
    first = sup.wait_event("job_claimed")[0]
    os.kill(first["pid"], signal.SIGKILL)
    sup.wait_event("job_handed_back")
    second = sup.wait_event("job_claimed", count=2)[1]
    assert second["pid"] != first["pid"] and second["job_id"] == first["job_id"]
    release.write_text("")
    wait_until(lambda: scalar(clean_db, "SELECT status FROM prefork_jobs") == "done",
               timeout=30, message="the job done")
    assert scalar(clean_db, "SELECT crashes FROM prefork_jobs") == 1
    assert log.read_text().split() == [str(first["job_id"])]


def test_a_drain_lets_handed_jobs_finish_and_writes_their_completions(
        supervisor, store, clean_db, tmp_path):
    """SIGTERM while handed children run: they finish, the parent writes what they
    left it, and exits 0 with every job done once."""
    log, release = tmp_path / "tally.log", tmp_path / "release"
    store().enqueue_many([new_job("tally", {"log": str(log), "until": str(release)},
                                  key=f"d{i}") for i in range(3)])
    sup = supervisor("--workers", "3", "--max-items", "1")
    sup.wait_event("job_claimed", count=3)
    sup.proc.send_signal(signal.SIGTERM)
    sup.wait_event("supervisor_stopping")
    release.write_text("")
    assert sup.wait_exit() == 0
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'") == 3
    assert sorted(log.read_text().split()) == sorted(
        str(event["job_id"]) for event in sup.events("job_claimed"))
    assert len(sup.events("job_completed_by_supervisor")) == 3


@pytest.mark.parametrize("dialect", ["mariadb", "mysql"], indirect=True)
def test_the_deferred_set_names_still_sets_the_sessions_character_set(store, dialect):
    """SET NAMES goes in the settings script, not alone at login: the session's
    character set is utf8mb4 all the same, and text outside the BMP round-trips."""
    s = store()
    assert s._one("SELECT @@character_set_client, @@character_set_connection,"
                  " @@character_set_results") == ("utf8mb4",) * 3
    assert s._one("SELECT %s", ("\N{SNAKE}",)) == ("\N{SNAKE}",)


def test_with_limits_declared_each_child_forked_per_job_claims_for_itself(
        tmp_path, migrated, clean_db, store):
    """Limited jobs wait outside the plain claim, for children that make limited
    claims: with a limit declared, no job is handed at the fork."""
    log = str(tmp_path / "runs.log")
    store().enqueue_many([new_job("plain.note", {"log": log}, key=f"n{i}") for i in range(4)])
    with supervisor_starter(tmp_path, migrated, "--app", "limits_app") as start:
        sup = start("--workers", "2", "--max-items", "1")
        wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs"
                                  " WHERE status = 'done'") == 4, timeout=60,
                   message="4 jobs done")
        ran = {event["pid"] for event in sup.events("job_claimed")}
        assert len(ran) == 4
        for pid in ran:   # each connected to claim its own
            assert sup.wait_event("worker_ready", pid=pid)[0]["connection"] is not None
    assert not sup.events("job_completed_by_supervisor")
