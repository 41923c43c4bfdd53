"""Fork per job (--max-items 1): a fresh process per job, with the recycling of the
pool overlapped. A child that retires gets its successor forked and connected first,
within the spares (decisions.spares: one per four workers), and each new child sets
its session up in two round trips. Real supervisors, real processes, real MariaDB
(both SQL dialects), a counting proxy in front of the server for the round trips."""
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
def test_a_childs_set_up_is_one_round_trip(tmp_path, migrated, clean_db, dialect,
                                           enqueue_many):
    """Counted at the wire: a child's commands before its first statement on the jobs
    (its first claim), in either dialect: one script, the driver's SET NAMES in it;
    no schema read, no SELECT CONNECTION_ID()."""
    database = migrated.rsplit("/", 1)[1]
    with QueryTap(SERVER["host"], SERVER["port"]) as tap:
        dsn = f"mysql://{SERVER['user']}@127.0.0.1:{tap.port}/{database}"
        with supervisor_starter(tmp_path, dsn, *APPS) as start:
            sup = start("--workers", "2", "--max-items", "1")
            enqueue_many(6, "rt")
            wait_until(lambda: scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 6,
                       timeout=60, message="6 ledger rows")
            ready = sup.wait_event("worker_ready", count=6)
        for event in ready:
            commands = tap.commands(event["connection"])
            first_claim = next(index for index, (_, sql) in enumerate(commands)
                               if "prefork_jobs" in sql)
            set_up = [sql for _, sql in commands[:first_claim]]
            assert len(set_up) == 1, f"child {event['pid']} set itself up with {set_up}"
            assert set_up[0].startswith("SET NAMES utf8mb4;"), set_up
            assert not any("prefork_schema_migrations" in sql or "CONNECTION_ID" in sql
                           for sql in set_up)


@pytest.mark.parametrize("dialect", ["mariadb", "mysql"], indirect=True)
def test_the_deferred_set_names_still_sets_the_sessions_character_set(store, dialect):
    """SET NAMES goes in the settings script, not alone at login: the session's
    character set is utf8mb4 all the same, and text outside the BMP round-trips."""
    s = store()
    assert s._one("SELECT @@character_set_client, @@character_set_connection,"
                  " @@character_set_results") == ("utf8mb4",) * 3
    assert s._one("SELECT %s", ("\N{SNAKE}",)) == ("\N{SNAKE}",)
