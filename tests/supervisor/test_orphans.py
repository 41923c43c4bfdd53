"""No job is ever run by two processes at once, nor left reserved and unrun, however a
child stops: its parent killed or frozen under it (issue 11, item 7), or told to retire
while its completion claims the next job (item 8). Real supervisors, real signals, real
MariaDB; a handler marks each run's start and end in a file, so that two runs at once
show."""
import os
import signal
import time
from dataclasses import dataclass
from typing import Optional

import psutil
import pytest
from conftest import APPS as APPS_DIR
from conftest import ROOT, job_row, scalar, wait_until
from harness import supervisor_starter, wait_gone

from prefork.jobs import new_job
from prefork.logs import current_host_pid
from prefork.supervisor.holders import holder_still_runs

FAST_REGISTRY = ("--heartbeat-interval", "0.3", "--supervisor-timeout", "2")

MARKED_APP = '''
import os
import time

from ledger_app import ledger as write_ledger

import prefork


def mark(path, what):
    with open(path, "a") as log:
        log.write(f"{os.getpid()} {what} {time.time()}\\n")


@prefork.handler("marked")
def marked(job):
    """Sleeps payload['seconds'] (payload['rerun_seconds'] once the log holds a run)
    between a start mark and an end mark ('done', or 'stopped' when interrupted) in
    payload['log'], then writes its ledger row with its completion."""
    rerun = os.path.exists(job.payload["log"])
    mark(job.payload["log"], "start")
    try:
        time.sleep(job.payload["rerun_seconds" if rerun else "seconds"])
    except BaseException:
        mark(job.payload["log"], "stopped")
        raise
    mark(job.payload["log"], "done")
    write_ledger(job)
'''


@dataclass
class Run:
    pid: int
    start: float
    end: Optional[float] = None   # None: it never said it ended (killed, or still running)
    how: Optional[str] = None     # "done" or "stopped"


def read_runs(log):
    """The handler's runs, in the order they started."""
    runs = {}
    for line in log.read_text().splitlines():
        pid, what, when = line.split()
        if what == "start":
            runs[int(pid)] = Run(int(pid), float(when))
        else:
            runs[int(pid)].end, runs[int(pid)].how = float(when), what
    return sorted(runs.values(), key=lambda run: run.start)


def assert_one_run_at_a_time(runs):
    for earlier, later in zip(runs, runs[1:]):
        assert earlier.end is not None and earlier.end <= later.start, \
            f"two runs of one job at once: {earlier} and {later}"


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    (tmp_path / "marked_app.py").write_text(MARKED_APP)
    path = os.pathsep.join([str(tmp_path), str(APPS_DIR), str(ROOT)])
    with supervisor_starter(tmp_path, migrated, "--app", "ledger_app,supervised_app,marked_app",
                            *FAST_REGISTRY) as start:
        yield lambda *args: start(*args, env={"PYTHONPATH": path})


@pytest.fixture
def enqueue(store):
    s = store()
    return lambda job_type, payload=None, **kw: s.enqueue(new_job(job_type, payload or {}, **kw))


def long_then_short(log):
    """A first run far longer than the test (it must be stopped), a quick second one."""
    return {"seconds": 20, "rerun_seconds": 0.2, "log": str(log)}


def busy_child(sup, job_id, log):
    """The pid of the child running the job, once its handler has started (a claim
    comes before the handler: a stop between them runs no handler at all)."""
    pid = sup.wait_event("job_claimed", job_id=job_id)[0]["pid"]
    wait_until(lambda: log.exists() and any(run.pid == pid for run in read_runs(log)),
               timeout=30, message="the handler started")
    return pid


def ledger_count(conn):
    return scalar(conn, "SELECT COUNT(*) FROM ledger")


def unfinished(conn):
    return scalar(conn, "SELECT COUNT(*) FROM prefork_jobs WHERE status <> 'done'")


def test_a_child_whose_parent_is_killed_stops_its_job_and_gives_it_back(
        supervisor, enqueue, clean_db, tmp_path):
    """kill -9 of the supervisor, a new one started at once on the same host: the
    orphan (nobody extends its lease or enforces its timeouts now) stops its handler
    as a quick stop does and gives the job back, its attempt restored; the new
    supervisor runs it, never beside the orphan."""
    log = tmp_path / "runs.log"
    job_id = enqueue("marked", long_then_short(log), key="orphaned")
    doomed = supervisor("--workers", "2")
    orphan = busy_child(doomed, job_id, log)
    doomed.proc.kill()
    doomed.proc.wait(5)
    successor = supervisor("--workers", "2")
    wait_gone([orphan], timeout=10)   # long before its 20 s job could have ended
    assert doomed.events("claim_released_on_shutdown", job_id=job_id, interrupted=True)
    successor.wait_event("job_completed", job_id=job_id, timeout=60)
    runs = read_runs(log)
    assert [(run.pid == orphan, run.how) for run in runs] == [(True, "stopped"), (False, "done")]
    assert_one_run_at_a_time(runs)
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("done", 1)   # the orphan's attempt given back
    assert ledger_count(clean_db) == 1


def test_a_silent_supervisors_running_job_is_not_handed_out_again(
        supervisor, enqueue, clean_db, tmp_path):
    """A frozen supervisor (SIGSTOP: silent, its child not) is pruned by another on
    the same host, which must not hand back a job whose holder still runs here; it
    comes back once the holder gives it back (its parent silent, it gives the job up
    before the prune: worker/parent_pulse.py)."""
    log = tmp_path / "runs.log"
    job_id = enqueue("marked", long_then_short(log), key="frozen")
    frozen = supervisor("--workers", "1")
    holder = busy_child(frozen, job_id, log)
    frozen.signal(signal.SIGSTOP)
    successor = supervisor("--workers", "2")
    pruned = successor.wait_event("supervisor_pruned", timeout=30)[0]
    assert pruned["jobs_handed_back"] == 0
    assert frozen.events("worker_parent_silent", job_id=job_id)
    assert frozen.events("claim_released_on_shutdown", job_id=job_id, interrupted=True)
    os.kill(frozen.pid, signal.SIGKILL)
    successor.wait_event("job_completed", job_id=job_id, timeout=60)
    runs = read_runs(log)
    assert [run.pid == holder for run in runs] == [True, False]
    assert_one_run_at_a_time(runs)
    assert ledger_count(clean_db) == 1


def test_a_prune_spares_the_jobs_of_live_holders_on_this_host_only(backend_store, db):
    """The store's side, on every backend, with the supervisor's real check: a job whose
    holder runs here (this test's own process) is spared; one whose holder is gone
    here, or runs on another host, goes back."""
    s = backend_store()
    silent = s.register_process("host-a", 100, ["default"], 3, "0.1.0")
    host, _, _ = current_host_pid().rpartition(":")
    gone = free_pid()
    ids = [s.enqueue(new_job("noop", key=f"k{n}")) for n in range(3)]
    for worker in (current_host_pid(), f"{host}:{gone}", f"elsewhere-{host}:{os.getpid()}"):
        s.claim(["default"], worker, 300, process_id=silent)
    db.sleep(0.3)
    assert s.prune_silent(0.2, spare=holder_still_runs) == [(silent, 2)]
    assert [db.row(job_id)["status"] for job_id in ids] == ["reserved", "ready", "ready"]


def free_pid():
    """A pid no process has now."""
    return next(pid for pid in range(2 ** 22 - 1, 1, -1) if not psutil.pid_exists(pid))


def test_a_rolling_reload_strands_no_job(supervisor, enqueue, clean_db, tmp_path):
    """SIGHUP retires every child, one at a time, with SIGTERM; one that gets it while its
    completion also claims the next job must give that job back, not leave it reserved
    and unrun until its lease (300 s here: far beyond this test's waits) runs out."""
    log = tmp_path / "ran.log"
    ids = [enqueue("tally", {"seconds": 0.05, "log": str(log)}) for _ in range(80)]
    sup = supervisor("--workers", "4", "--lease-seconds", "300")
    sup.wait_event("job_claimed")
    for _ in range(12):
        sup.signal(signal.SIGHUP)
        time.sleep(0.1)
    wait_until(lambda: unfinished(clean_db) == 0, timeout=30,
               message="every job done (a stranded one stays reserved, unrun, for 300 s)")
    assert sorted(int(line) for line in log.read_text().split()) == ids
