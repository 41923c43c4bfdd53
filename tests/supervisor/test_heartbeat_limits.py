"""No setting and no pool size may make a supervisor's heartbeat fail, and one whose
heartbeats fail anyway stops taking jobs before another supervisor may prune it (a
failing heartbeat is what makes a live supervisor look dead, and its running jobs run
twice). Real supervisors on MariaDB, a second "host" by its own UTS namespace."""
import json
import os
import signal
import time
import uuid
from contextlib import closing

import pytest
from conftest import SERVER, admin_connection, job_row, run_cli, wait_until
from harness import SupervisorProcess, supervisor_starter

from prefork import config as config_module
from prefork.jobs import Lease, new_job
from prefork.store.mysql.schema import grant_statements
from prefork.supervisor.children import ChildProcess, RunningJob
from prefork.supervisor.heartbeat import MAX_CHILDREN_BYTES
from prefork.supervisor.pool import Pool
from prefork.supervisor.upkeep import Upkeep

APPS = ("--app", "ledger_app,supervised_app")
REGISTRY = ("--heartbeat-interval", "1", "--supervisor-timeout", "6")
LONG_QUEUES = ["default"] + [f"q{n:02d}".ljust(64, "x") for n in range(20)]   # 1,306 chars
OTHER_HOST = "heartbeat-other-host"


class OtherHost(SupervisorProcess):
    """A supervisor on a host of another name: its own UTS namespace (we run as root)."""

    def start(self):
        self.command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                        OTHER_HOST, *self.command]
        super().start()


@pytest.fixture
def supervisors(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS, *REGISTRY) as start:
        yield start


@pytest.fixture
def enqueue(store):
    s = store()
    return lambda job_type, payload=None, **kw: s.enqueue(new_job(job_type, payload or {}, **kw))


def registry_queues(conn, pid):
    with conn.cursor() as cursor:
        cursor.execute("SELECT queues FROM prefork_processes WHERE pid = %s AND state = 'running'",
                       (pid,))
        row = cursor.fetchone()
    return row and row[0].split(",")


# -- the queue list -------------------------------------------------------------------

def test_a_long_queue_list_given_by_sighup_never_runs_a_job_twice_at_once(
        tmp_path, supervisors, enqueue, migrated, clean_db):
    alpha = supervisors("--workers", "1", config_text="[prefork-queue]\nqueues = default\n")
    job_id = enqueue("slow_ledger", {"seconds": 25}, key="once")
    alpha.wait_event("job_claimed", job_id=job_id, timeout=30)
    other = OtherHost(tmp_path, migrated, *APPS, *REGISTRY, "--workers", "1", name="other")
    try:
        other.wait_event("worker_ready", timeout=30)
        alpha.config_path.write_text(f"[prefork-queue]\nqueues = {','.join(LONG_QUEUES)}\n")
        os.kill(alpha.pid, signal.SIGHUP)
        alpha.wait_event("config_reloaded")
        wait_until(lambda: registry_queues(clean_db, alpha.pid) == LONG_QUEUES, timeout=10,
                   message="the new queue list in alpha's heartbeat")
        alpha.wait_event("job_completed", job_id=job_id, timeout=60)
        row = job_row(clean_db, job_id)
        assert (row["status"], row["attempts"]) == ("done", 1)
        assert not other.events("supervisor_pruned") and not other.events("job_claimed")
        assert not alpha.events("job_lease_lost") and not alpha.events("heartbeat_failing")
    finally:
        other.kill_all()


def test_run_works_a_list_of_twenty_long_queues(supervisors, enqueue, migrated, clean_db):
    sup = supervisors("--workers", "1", "--queues", ",".join(LONG_QUEUES))
    sup.wait_event("supervisor_registered", timeout=30)
    job_id = enqueue("slow_ledger", {"seconds": 0}, queue=LONG_QUEUES[-1], key="long")
    sup.wait_event("job_completed", job_id=job_id, timeout=30)
    wait_until(lambda: registry_queues(clean_db, sup.pid) == LONG_QUEUES)
    report = json.loads(run_cli("status", "--json", dsn=migrated).stdout)
    assert [s["queues"] for s in report["supervisors"] if s["pid"] == sup.pid] == [LONG_QUEUES]


@pytest.mark.parametrize("queues, words", [
    ("default," + "q" * 65, "invalid queue name 'qqqq"),
    ("default,mail box", "invalid queue name 'mail box'"),
    (",".join(f"q{n}" for n in range(1001)), "lists 1001 queues; at most 1000"),
])
def test_a_queue_list_no_job_could_be_in_is_refused_in_one_line(migrated, queues, words):
    result = run_cli("run", "--app", "ledger_app", "--queues", queues, dsn=migrated, timeout=60)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_bad_queue_list_by_sighup_is_refused_and_the_old_one_kept(supervisors, clean_db):
    sup = supervisors("--workers", "1", config_text="[prefork-queue]\nqueues = default,mail\n")
    sup.wait_event("worker_ready", timeout=30)
    sup.config_path.write_text("[prefork-queue]\nqueues = default,mail,\u00e9t\u00e9\n")
    os.kill(sup.pid, signal.SIGHUP)
    refused = sup.wait_event("config_reload_failed")[0]
    assert "invalid queue name" in refused["error"]
    assert not sup.events("config_reloaded")
    assert registry_queues(clean_db, sup.pid) == ["default", "mail"]


# -- the children's description ---------------------------------------------------------

def busy_pool(config, count, type_length=128):
    """A Pool whose `count` children (not forked: records only) all run a job of a type
    of type_length characters."""
    pool = Pool(config, forget_parent=lambda: None, claim_for_children=lambda count: [],
                hands_jobs=lambda: False)
    fds = []
    for slot in range(count):
        read_fd, write_fd = os.pipe()
        fds += [read_fd, write_fd]
        child = ChildProcess(4_000_000 + slot, slot, 0, read_fd, write_fd, write_fd)
        lease = Lease(10 ** 12 + slot, uuid.uuid4().hex)
        child.job = RunningJob(lease, ("t" * type_length)[:type_length], "default",
                               time.monotonic())
        pool.children[child.pid] = child
    return pool, fds


@pytest.mark.parametrize("count", [300, 5000])
def test_a_large_pool_on_long_job_types_heartbeats(queue_dsn, backend, count):
    config = config_module.load({"dsn": queue_dsn, "heartbeat_interval": "1"}, environ={})
    pool, fds = busy_pool(config, count)
    upkeep = Upkeep(config, pool.pulse)
    try:
        upkeep.register(count)
        upkeep.next_beat_at = 0.0
        upkeep.beat_when_due(time.monotonic(), count, lambda: pool.describe(time.monotonic()))
        assert not upkeep.heartbeat.holding
        (process,) = [p for p in upkeep.store.running_processes()
                      if p["id"] == upkeep.process_id]
        children = json.loads(process["children"])
        assert len(process["children"]) <= MAX_CHILDREN_BYTES
        if count == 300:   # all of them, as they are
            assert [c["slot"] for c in children] == list(range(300))
            assert all(len(c["type"]) == 128 for c in children)
        else:   # as many as fit, and a last entry that counts the others
            left_out = count - (len(children) - 1)
            assert children[-1]["state"] == f"{left_out} more workers not listed"
            assert [c["slot"] for c in children[:-1]] == list(range(len(children) - 1))
    finally:
        upkeep.leave()
        upkeep.close()
        for fd in fds:
            os.close(fd)


# -- a heartbeat that fails anyway ---------------------------------------------------------

@pytest.fixture
def worker_account(migrated):
    """(dsn, password, revoke, grant) of a least-privilege account on the test database:
    revoke() takes its UPDATE on prefork_processes away, grant() gives it back."""
    database = migrated.rsplit("/", 1)[1]
    user, password = f"pq_hb_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with closing(admin_connection()) as admin, admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (password,))
        for statement in grant_statements(user, "%", database):
            cursor.execute(statement)

        def change(verb):
            cursor.execute(f"{verb} UPDATE ON `{database}`.`prefork_processes` "
                           f"{'FROM' if verb == 'REVOKE' else 'TO'} '{user}'@'%'")
        dsn = f"mysql://{user}@{SERVER['host']}:{SERVER['port']}/{database}"
        try:
            yield dsn, password, lambda: change("REVOKE"), lambda: change("GRANT")
        finally:
            cursor.execute(f"DROP USER '{user}'@'%'")


def test_a_supervisor_whose_heartbeat_fails_takes_no_new_job_until_it_beats_again(
        tmp_path, worker_account, enqueue, clean_db):
    dsn, password, revoke, grant = worker_account
    log = tmp_path / "ran"
    with supervisor_starter(tmp_path, dsn, *APPS, "--heartbeat-interval", "0.5",
                            "--supervisor-timeout", "6", "--poll-interval", "0.2") as start:
        sup = start("--workers", "2", env={"PREFORK_QUEUE_DB_PASSWORD": password})
        sup.wait_event("worker_ready", count=2, timeout=30)
        running = enqueue("tally", {"seconds": 3, "log": str(log)}, key="running")
        sup.wait_event("job_claimed", job_id=running)
        revoke()
        failing = sup.wait_event("heartbeat_failing", timeout=10)[0]
        assert failing["error"] == "pymysql.err.OperationalError 1142"
        assert failing["level"] == "error" and failing["seconds_since_heartbeat"] < 6
        # The running job ends as it would have; no child is left to take another.
        sup.wait_event("worker_exited", count=2, reason="heartbeat failing", timeout=30)
        assert log.read_text().split() == [str(running)]
        waiting = enqueue("tally", {"seconds": 0, "log": str(log)}, key="waiting")
        errors = len(sup.events("supervisor_db_error"))
        sup.wait_event("supervisor_db_error", count=errors + 3, timeout=20)
        assert (job_row(clean_db, waiting)["status"], job_row(clean_db, waiting)["attempts"]) \
            == ("ready", 0)
        grant()
        sup.wait_event("heartbeat_restored", timeout=20)
        sup.wait_event("job_completed", job_id=waiting, timeout=30)
        assert log.read_text().split() == [str(running), str(waiting)]
