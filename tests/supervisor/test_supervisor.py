"""The pre-fork supervisor, watched from outside: real processes, real signals, real MariaDB.
A deadline here bounds a wait (generously: CI machines are shared and noisy); what a
test proves is what happened, never how fast."""
import os
import re
import signal
import time
from collections import Counter

import psutil
import pytest
from conftest import APPS as APPS_DIR
from conftest import ROOT, SERVER, admin_connection, job_row, scalar, wait_until
from harness import process_gone, supervisor_starter, wait_gone

from prefork.jobs import new_job

APPS = "--app", "ledger_app,supervised_app"


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS) as start:
        yield start


@pytest.fixture
def enqueue(store):
    s = store()

    def add(job_type, payload=None, **kwargs):
        return s.enqueue(new_job(job_type, payload or {}, **kwargs))
    return add


def busy_child(sup, job_id, timeout=10):
    """The pid of the child running job_id, read from the job row's locked_by (host:pid)."""
    return sup.wait_event("job_claimed", job_id=job_id, timeout=timeout)[0]["pid"]


def ledger_count(conn):
    return scalar(conn, "SELECT COUNT(*) FROM ledger")


def test_children_each_open_their_own_connection(supervisor):
    sup = supervisor("--workers", "3")
    ready = sup.wait_event("worker_ready", count=3)
    parent_connection = sup.events("supervisor_started")[0]["connection"]
    connections = [event["connection"] for event in ready]
    assert len(set(connections)) == 3 and parent_connection not in connections
    assert {event["pid"] for event in ready} == {child.pid for child in sup.wait_children(3)}


def test_sigkill_of_a_busy_child_hands_its_job_back_at_once(supervisor, enqueue, clean_db):
    """At once: the parent hands the job back when it reaps the child, long before
    the job's 300 s lease could expire (which would be lease recovery, not this).
    The 60 s retry backoff keeps it ready for the replacement not to take it."""
    job_id = enqueue("slow_ledger", {"seconds": 600}, key="k1")
    sup = supervisor("--workers", "2", "--retry-base", "60", "--lease-seconds", "300")
    pid = busy_child(sup, job_id)
    psutil.Process(pid).kill()
    handed_back = sup.wait_event("job_handed_back", job_id=job_id, timeout=60)[0]
    assert (handed_back["cause"], handed_back["status"], handed_back["charged"]) == \
        ("SIGKILL", "ready", True)
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"], row["crashes"], row["last_error"]) == \
        ("ready", 1, 1, "worker died: SIGKILL")
    assert not sup.events("leases_recovered")
    replacement = sup.wait_children(2)
    assert pid not in {child.pid for child in replacement}
    exited = sup.wait_event("worker_exited", pid=pid)[0]
    assert exited["status"] == "SIGKILL" and exited["reason"] == "crash"
    assert process_gone(pid)  # reaped: no zombie left


def test_a_job_that_keeps_killing_its_worker_is_poison(supervisor, enqueue, clean_db):
    job_id = enqueue("segv", max_attempts=10)
    ok_id = enqueue("slow_ledger", {"seconds": 0}, key="survivor")
    sup = supervisor("--workers", "2", "--retry-base", "0.01", "--max-crashes", "3")
    wait_until(lambda: job_row(clean_db, job_id)["status"] == "dead", timeout=20,
               message="poison job dead")
    row = job_row(clean_db, job_id)
    assert row["last_error"] == "crashed its worker 3 times: SIGSEGV"
    assert row["attempts"] == 3
    assert wait_until(lambda: job_row(clean_db, ok_id)["status"] == "done")
    sup.wait_children(2)
    # Sent to dead by its workers' deaths, not by a failure a worker recorded: the
    # master's title counts it all the same.
    wait_until(lambda: "dead 1 since start" in sup.title(sup.pid), timeout=10,
               message=f"the master's title to count the poison job: {sup.title(sup.pid)!r}")


def test_children_leave_when_the_parent_is_killed(supervisor, enqueue, clean_db):
    """PDEATHSIG is a quick stop: with nobody left to extend its lease or enforce its
    timeouts, the busy child stops its handler and gives the job back unused."""
    job_id = enqueue("slow_ledger", {"seconds": 60}, key="orphan-check")
    sup = supervisor("--workers", "3")
    busy_child(sup, job_id)
    children = [child.pid for child in sup.wait_children(3)]
    sup.proc.kill()
    sup.proc.wait(5)
    wait_gone(children, timeout=15)   # long before the busy one's 60 s job could end
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("ready", 0)
    assert ledger_count(clean_db) == 0


def test_sigterm_drains_running_jobs_and_exits_zero(supervisor, enqueue, clean_db):
    job_id = enqueue("slow_ledger", {"seconds": 1.5}, key="drain")
    sup = supervisor("--workers", "2")
    busy_child(sup, job_id)
    children = [child.pid for child in sup.children()]
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(20) == 0
    assert job_row(clean_db, job_id)["status"] == "done"
    assert ledger_count(clean_db) == 1
    wait_gone(children)
    assert sup.events("supervisor_stopped")


def test_graceful_timeout_kills_stragglers_and_gives_the_attempt_back(supervisor, enqueue, clean_db):
    job_id = enqueue("slow_ledger", {"seconds": 60}, key="straggler")
    sup = supervisor("--workers", "1", "--graceful-timeout", "1")
    busy_child(sup, job_id)
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit(10) == 0
    row = job_row(clean_db, job_id)
    assert row["status"] == "ready" and row["attempts"] == 0 and row["crashes"] == 0
    assert row["last_error"] == "worker stopped: graceful timeout"


@pytest.mark.parametrize("how", ["SIGQUIT", "double SIGINT"])
def test_quick_stop_returns_jobs_without_using_an_attempt(supervisor, enqueue, clean_db, how):
    job_id = enqueue("slow_ledger", {"seconds": 60}, key="quick")
    sup = supervisor("--workers", "2")
    busy_child(sup, job_id)
    if how == "SIGQUIT":
        sup.signal(signal.SIGQUIT)
    else:
        sup.signal(signal.SIGINT)
        sup.wait_event("supervisor_stopping")
        sup.signal(signal.SIGINT)
    assert sup.wait_exit(10) == 0
    row = job_row(clean_db, job_id)
    assert row["status"] == "ready" and row["attempts"] == 0
    assert ledger_count(clean_db) == 0


def test_sighup_applies_a_new_worker_count_rolling(supervisor, tmp_path):
    sup = supervisor(config_text="[prefork-queue]\nworkers = 2\n")
    old = {child.pid for child in sup.wait_children(2)}
    sup.config_path.write_text("[prefork-queue]\nworkers = 3\n")
    sup.signal(signal.SIGHUP)
    sup.wait_event("config_reloaded", workers=3)
    peak = 0
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        kids = {child.pid for child in sup.children()}
        peak = max(peak, len(kids))
        if len(kids) == 3 and not kids & old:
            break
        time.sleep(0.01)
    assert len(kids) == 3 and not kids & old, "all children replaced by the new generation"
    assert peak <= 4, f"the reload surged to {peak} children"


def test_sighup_with_an_invalid_file_keeps_the_old_config(supervisor):
    sup = supervisor(config_text="[prefork-queue]\nworkers = 2\n")
    old = {child.pid for child in sup.wait_children(2)}
    sup.config_path.write_text("[prefork-queue]\nworkers = lots\n")
    sup.signal(signal.SIGHUP)
    failed = sup.wait_event("config_reload_failed")[0]
    assert "workers" in failed["error"]
    time.sleep(0.3)  # give a wrong reaction the time to show
    assert {child.pid for child in sup.children()} == old
    assert sup.proc.poll() is None


def test_ttin_and_ttou_add_and_remove_a_worker(supervisor):
    sup = supervisor("--workers", "2")
    sup.wait_children(2)
    sup.signal(signal.SIGTTIN)
    sup.wait_children(3)
    sup.signal(signal.SIGTTOU)
    sup.wait_children(2)  # signals of one kind sent together may merge: one at a time
    sup.signal(signal.SIGTTOU)
    sup.wait_children(1)
    assert "workers 1/1" in sup.title(sup.pid)


def test_max_items_recycles_one_child_at_a_time_without_losing_jobs(supervisor, enqueue,
                                                                       clean_db):
    ids = [enqueue("slow_ledger", {"seconds": 0}, key=f"r{i}") for i in range(30)]
    sup = supervisor("--workers", "3", "--max-items", "2", "--max-items-jitter", "1")
    peak, deadline = 0, time.monotonic() + 60
    while ledger_count(clean_db) < 30:
        peak = max(peak, len(sup.children()))
        assert sup.proc.poll() is None
        assert time.monotonic() < deadline, f"{ledger_count(clean_db)} of 30 jobs done in 60 s"
        time.sleep(0.005)
    assert peak <= 4, f"{peak} children at once"
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'"
                  " AND attempts = 1") == 30
    # Each child retires after 2 or 3 jobs (max-items 2, jitter 1); up to 4 live ones may
    # hold 2 jobs each without retiring, so at least (30 - 8) / 3 -> 8 have retired. A retired
    # child's event can trail the 30th job's commit: wait for it rather than read it once.
    recycled = sup.wait_event("worker_recycled", count=8, timeout=30)
    assert {e["reason"] for e in recycled} == {"max-items"}
    ran = Counter(e["pid"] for e in sup.events("job_claimed"))
    assert sum(ran.values()) == 30 and max(ran.values()) <= 3, ran
    assert all(ran[e["pid"]] in (2, 3) for e in recycled), (ran, recycled)
    assert job_row(clean_db, ids[-1])["crashes"] == 0


def test_max_items_one_gives_each_job_a_fresh_process(supervisor, enqueue, clean_db):
    for i in range(6):
        enqueue("slow_ledger", {"seconds": 0}, key=f"fresh{i}")
    sup = supervisor("--workers", "2", "--max-items", "1")
    wait_until(lambda: ledger_count(clean_db) == 6, timeout=20)
    pids = [event["pid"] for event in sup.events("job_claimed")]
    assert len(pids) == 6 and len(set(pids)) == 6


def test_max_memory_recycles_a_leaking_child(supervisor, enqueue, clean_db):
    for i in range(4):
        enqueue("hog", key=f"hog{i}")
    sup = supervisor("--workers", "1", "--max-memory", "60", "--min-lifetime", "0")
    wait_until(lambda: ledger_count(clean_db) == 4, timeout=20)
    recycled = sup.wait_event("worker_recycled", reason="max-memory")
    assert recycled
    assert scalar(clean_db, "SELECT MAX(attempts) FROM prefork_jobs") == 1


def test_hard_timeout_kills_the_child_and_counts_an_attempt(supervisor, enqueue, clean_db):
    job_id = enqueue("stuck", max_attempts=5)
    sup = supervisor("--workers", "1", "--retry-base", "60")
    pid = busy_child(sup, job_id)
    wait_until(lambda: job_row(clean_db, job_id)["status"] == "ready", timeout=30,
               message="hard-timed-out job handed back")
    row = job_row(clean_db, job_id)
    assert row["last_error"] == "worker died: hard timeout after 1s" and row["attempts"] == 1
    wait_gone([pid])
    replacement = sup.wait_children(1)
    assert replacement[0].pid != pid


def test_soft_timeout_interrupts_the_handler(supervisor, enqueue, clean_db):
    job_id = enqueue("dawdle", max_attempts=1)
    sup = supervisor("--workers", "1")
    wait_until(lambda: job_row(clean_db, job_id)["status"] == "dead", timeout=30)
    assert job_row(clean_db, job_id)["last_error"] == "soft timeout after 0.5s"
    sup.wait_children(1)
    assert not sup.events("worker_exited")  # the child survived its job's timeout


def test_a_job_longer_than_its_lease_keeps_it(supervisor, enqueue, clean_db):
    job_id = enqueue("slow_ledger", {"seconds": 5}, key="long")
    supervisor("--workers", "2", "--lease-seconds", "2")
    wait_until(lambda: job_row(clean_db, job_id)["status"] == "done", timeout=30)
    row = job_row(clean_db, job_id)
    assert row["attempts"] == 1 and row["last_error"] is None
    assert ledger_count(clean_db) == 1


def test_titles_show_what_each_process_does(supervisor, enqueue):
    job_id = enqueue("slow_ledger", {"seconds": 5}, key="title")
    sup = supervisor("--workers", "2", "--queues", "default,mail")
    busy = busy_child(sup, job_id)
    sup.wait_children(2)
    assert wait_until(lambda: "workers 2/2" in sup.title(sup.pid))
    parent = sup.title(sup.pid)
    assert parent.startswith("prefork-queue master [default,mail] workers 2/2 done 0 dead 0")
    busy_title = wait_until(lambda: (lambda t: t if re.search(r" [1-9]\d*s$", t) else None)(
        sup.title(busy)), timeout=15, message="the busy title counting seconds")
    assert busy_title.startswith("prefork-queue worker ") and \
        f"[default,mail] busy job {job_id} slow_ledger" in busy_title
    idle = [child.pid for child in sup.children() if child.pid != busy][0]
    assert sup.title(idle).endswith("[default,mail] idle")
    wait_until(lambda: "done 1 dead 0" in sup.title(sup.pid), timeout=30)
    for pid in [sup.pid, busy, idle]:
        assert "mysql://" not in sup.title(pid)


def test_start_fails_cleanly_before_forking(tmp_path, migrated):
    from conftest import run_cli
    result = run_cli("run", "--app", "no_such_module_xyz", dsn=migrated)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "no_such_module_xyz" in result.stderr
    result = run_cli("run", "--app", "ledger_app", "--workers", "0", dsn=migrated)
    assert result.returncode == 2 and "workers" in result.stderr and "Traceback" not in result.stderr


def test_idle_workers_wake_at_once_for_jobs_enqueued_on_this_host(supervisor, enqueue, clean_db,
                                                                    migrated):
    """Through the store, or in the application's transaction followed by
    prefork.notify(): found in well under the poll interval (30 s here)."""
    from conftest import admin_connection

    import prefork
    sup = supervisor("--workers", "2", "--poll-interval", "30")
    sup.wait_event("worker_ready", count=2)
    through_store = enqueue("noop")
    wait_until(lambda: job_row(clean_db, through_store)["status"] == "done", timeout=10,
               message="a job enqueued through the store run at once")
    app = admin_connection(database=migrated.rsplit("/", 1)[1], autocommit=False)
    try:
        in_transaction = prefork.enqueue(app, "noop")
        app.commit()
        prefork.notify(app)
    finally:
        app.close()
    wait_until(lambda: job_row(clean_db, in_transaction)["status"] == "done", timeout=10,
               message="a job enqueued in the application's transaction run after notify()")


def tallied(log):
    return sorted(int(line) for line in log.read_text().split()) if log.exists() else []


@pytest.fixture
def warm_batch(enqueue, store, clean_db):
    """warm_batch(*(job type, payload, priority)): run a few no-op jobs first, so
    that the worker's recent jobs were fast (only then does it claim batches), then
    enqueue these in one transaction, for the idle worker to claim as one batch.
    Returns their ids, in order."""
    def run(*specs):
        warm = [enqueue("noop") for _ in range(12)]
        wait_until(lambda: all(job_row(clean_db, j)["status"] == "done" for j in warm),
                   timeout=10, message="the warm-up jobs done")
        keys = [f"batch-{n}" for n in range(len(specs))]
        store().enqueue_many([new_job(job_type, payload, key=key, priority=priority)
                              for key, (job_type, payload, priority) in zip(keys, specs)])
        return [scalar(clean_db, "SELECT id FROM prefork_jobs WHERE idempotency_key = %s", (key,))
                for key in keys]
    return run


def test_a_dead_workers_done_but_unwritten_jobs_are_completed_by_the_parent(
        supervisor, warm_batch, clean_db, tmp_path):
    # A batch the worker claimed itself (claimer = supervisor writes each completion
    # as its child reports it: test_supervisor_claims.py).
    log = tmp_path / "tally.log"
    sup = supervisor("--workers", "1", "--claim-batch", "8", "--max-crashes", "1",
                     "--claimer", "worker")
    done, crash = warm_batch(("tally", {"log": str(log)}, 0), ("segv", {}, 1))
    wait_until(lambda: job_row(clean_db, crash)["status"] == "dead", timeout=10,
               message="the crashing job dead")
    # The tally job ran first in the crashing job's batch: its completion was
    # still to be written with the batch's last job when the worker died.
    saved = sup.wait_event("job_completed_by_supervisor", job_id=done)
    assert saved[0]["why"] == "its worker died"
    assert tallied(log) == [done]   # it ran once: not handed back to run again
    row = job_row(clean_db, done)
    assert (row["status"], row["attempts"]) == ("done", 1)


def test_done_jobs_of_a_batch_read_done_while_a_slower_job_of_it_runs(
        supervisor, warm_batch, clean_db, tmp_path):
    log = tmp_path / "tally.log"
    release = tmp_path / "release"
    supervisor("--workers", "1", "--claim-batch", "8")
    fast, slow = warm_batch(("tally", {"log": str(log)}, 0),
                            ("tally", {"log": str(log), "until": str(release)}, 1))
    wait_until(lambda: job_row(clean_db, fast)["status"] == "done", timeout=30,
               message="the fast job, written by the parent while the slow one runs")
    assert job_row(clean_db, slow)["status"] == "reserved"
    release.touch()
    wait_until(lambda: job_row(clean_db, slow)["status"] == "done", timeout=30)
    assert tallied(log) == [fast, slow]


def test_jobs_held_in_a_batch_come_back_unused_when_their_worker_dies(supervisor, warm_batch,
                                                                        clean_db):
    sup = supervisor("--workers", "1", "--claim-batch", "8", "--retry-base", "60")
    slow, *behind = warm_batch(("slow_ledger", {"seconds": 60}, 1),
                               *[("slow_ledger", {"seconds": 0}, 2)] * 4)
    pid = busy_child(sup, slow)
    wait_until(lambda: all(job_row(clean_db, j)["status"] == "reserved" for j in behind),
               timeout=15, message="the jobs behind the slow one claimed in its batch")
    psutil.Process(pid).kill()
    wait_until(lambda: all(job_row(clean_db, j)["status"] == "done" for j in behind), timeout=30,
               message="the held jobs run by the replacement")
    for job_id in behind:   # given back unused: their one attempt is the replacement's
        row = job_row(clean_db, job_id)
        assert (row["attempts"], row["crashes"]) == (1, 0), row
        assert row["last_error"] == "worker stopped: SIGKILL before it started"
    row = job_row(clean_db, slow)
    assert (row["status"], row["crashes"], row["last_error"]) == \
        ("ready", 1, "worker died: SIGKILL")


ENV_APP = '''
import subprocess
import prefork

@prefork.handler("show_env")
def show_env(job):
    """Writes the environment a program started by this handler inherits."""
    env = subprocess.run(["env"], capture_output=True, text=True, check=True).stdout
    with open(job.payload["out"], "w") as out:
        out.write(env)
'''


@pytest.fixture
def password_user(database, mysql_server):
    """A MariaDB account with a password, on the test database: (user, password)."""
    user, password = "pq_password_test", "hunter2-not-for-children"
    conn = admin_connection()
    with conn.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, password))
        cursor.execute(f"GRANT ALL ON `{database}`.* TO %s@'%%'", (user,))
    yield user, password
    with conn.cursor() as cursor:
        cursor.execute("DROP USER IF EXISTS %s@'%%'", (user,))
    conn.close()


def test_handlers_programs_do_not_inherit_the_database_password(tmp_path, migrated, enqueue,
                                                                   password_user):
    """The child drops PREFORK_QUEUE_DB_PASSWORD once connected; the parent keeps it,
    so the children of a reload (SIGHUP) still connect."""
    user, password = password_user
    (tmp_path / "env_app.py").write_text(ENV_APP)
    path = os.pathsep.join([str(tmp_path), str(APPS_DIR), str(ROOT)])
    dsn = migrated.replace(f"//{SERVER['user']}@", f"//{user}@", 1)
    env = {"PYTHONPATH": path, "PREFORK_QUEUE_DB_PASSWORD": password}
    with supervisor_starter(tmp_path, dsn, "--app", "env_app") as start:
        sup = start("--workers", "1", env=env)
        for generation in (1, 2):   # the second: a child forked after a reload (SIGHUP)
            if generation == 2:
                sup.signal(signal.SIGHUP)
            sup.wait_event("worker_ready", count=generation)
            out = tmp_path / f"env{generation}.txt"
            sup.wait_event("job_completed", job_id=enqueue("show_env", {"out": str(out)}))
            assert password not in out.read_text()
            assert "PREFORK_QUEUE_DB_PASSWORD" not in out.read_text()
