"""Cancelling running jobs, watched from outside: real supervisors (the CLI in a
subprocess), real signals and processes, on MariaDB and on SQLite.

The cancel is requested through the store (store.cancel), as `prefork-queue cancel`
and prefork.cancel() request it; what the tests prove is what the supervisor then
does to the job, its handler, its child and its program."""
import os
import signal
from datetime import timedelta

import psutil
import pytest
from conftest import SERVER, wait_until
from harness import assert_never_logged, process_gone, supervisor_starter, wait_gone
from tcp_proxy import TcpProxy

from prefork.jobs import new_job, utc_now

APPS = "--app", "cancel_app"
FAST_LOOKS = "--poll-interval", "0.2"
COMMAND_CONFIG = "[command:cancel.sleep]\nargv = sleep 30\n"


@pytest.fixture
def supervisor(tmp_path, queue_dsn, db):
    with supervisor_starter(tmp_path, queue_dsn, *APPS, *FAST_LOOKS) as start:
        yield start


@pytest.fixture
def queue(backend_store):
    return backend_store()


@pytest.fixture
def markers(tmp_path):
    """markers(name) -> {"started": path, "finally": path, ...}, files a handler writes."""
    def make(name, *kinds):
        return {kind: str(tmp_path / f"{name}.{kind}") for kind in ("started", "finally") + kinds}
    return make


def wait_file(path, timeout=20):
    wait_until(lambda: os.path.exists(path), timeout=timeout, message=f"{path} to exist")


def settled(db, job_id, status, timeout=20):
    def check():
        row = db.row(job_id)
        return row if row["status"] == status else None
    return wait_until(check, timeout=timeout, message=f"job {job_id} {status}")


def running_child(sup, job_id):
    """The pid of the child that claimed job_id."""
    return sup.wait_event("job_claimed", job_id=job_id)[0]["pid"]


def assert_ended_cancelled(row):
    assert (row["status"], row["last_error"], row["attempts"]) == ("cancelled", "cancelled", 1)
    assert row["cancel_requested_at"] is None and row["finished_at"] is not None


def test_a_running_python_job_gets_job_cancelled_and_its_child_goes_on(
        supervisor, queue, db, markers, tmp_path):
    files = {**markers("wait", "inside"), "go": str(tmp_path / "go")}
    job_id = queue.enqueue(new_job("cancel.wait", files))
    sup = supervisor("--workers", "2")
    wait_file(files["started"])
    pid = running_child(sup, job_id)
    report = queue.cancel([job_id])
    assert report.stopping == [job_id] and not report.cancelled
    sent = sup.wait_event("job_cancel_sent", job_id=job_id)[0]
    assert (sent["pid"], sent["running"]) == (pid, True)
    open(files["go"], "w").close()   # the handler lets the cancel in inside its transaction

    cancelled = sup.wait_event("job_cancelled", job_id=job_id)[0]
    assert (cancelled["type"], cancelled["queue"], cancelled["pid"]) == \
        ("cancel.wait", "default", pid)
    assert_ended_cancelled(settled(db, job_id, "cancelled"))
    assert open(files["finally"]).read() == "finally ran"
    assert os.path.exists(files["inside"])   # its ledger row was written, then:
    assert db.scalar("SELECT COUNT(*) FROM ledger") == 0   # rolled back, never committed
    # The child was not killed: it runs the next job.
    after = markers("after")
    next_id = queue.enqueue(new_job("cancel.quick", after))
    settled(db, next_id, "done")
    assert sup.events("job_claimed", job_id=next_id)[0]["pid"] in \
        {child.pid for child in sup.wait_children(2)}
    assert psutil.Process(pid).is_running()
    log = sup.log_text()
    assert_never_logged(log, "job_cancel_killed")
    assert_never_logged(log, "job_handed_back")
    assert not sup.events("worker_exited")


def test_a_handler_that_ignores_the_cancel_is_killed_after_the_grace(
        supervisor, queue, db, markers):
    files = markers("stubborn", "caught")
    job_id = queue.enqueue(new_job("cancel.stubborn", files))
    sup = supervisor("--workers", "2", "--cancel-grace", "1")
    wait_file(files["started"])
    pid = running_child(sup, job_id)
    queue.cancel([job_id])

    wait_file(files["caught"])
    assert open(files["caught"]).read() == "JobCancelled"   # raised in it, and swallowed
    killed = sup.wait_event("job_cancel_killed", job_id=job_id)[0]
    assert (killed["pid"], killed["type"]) == (pid, "cancel.stubborn")
    exited = sup.wait_event("worker_exited", pid=pid)[0]
    assert (exited["status"], exited["reason"], exited["level"]) == ("SIGKILL", "cancelled", "info")
    row = settled(db, job_id, "cancelled")
    assert_ended_cancelled(row)
    assert row["crashes"] == 0   # ended cancelled, not handed back as a crash
    assert not sup.events("job_handed_back", job_id=job_id)
    wait_gone([pid])
    replacement = sup.wait_children(2)
    assert pid not in {child.pid for child in replacement}
    sup.wait_event("worker_ready", count=3)   # the pool is back to full strength


def test_a_command_job_is_stopped_and_its_process_group_is_gone(
        supervisor, queue, db):
    job_id = queue.enqueue(new_job("cancel.sleep", {}))
    sup = supervisor("--workers", "2", config_text=COMMAND_CONFIG)
    started = sup.wait_event("command_started", job_id=job_id)[0]
    program = psutil.Process(started["command_pid"])
    assert program.cmdline() == ["sleep", "30"]
    group = os.getpgid(program.pid)
    assert group not in (os.getpgid(sup.proc.pid), os.getpgid(started["pid"]))
    queue.cancel([job_id])

    sup.wait_event("job_cancelled", job_id=job_id)
    assert_ended_cancelled(settled(db, job_id, "cancelled"))
    assert sup.wait_event("command_stopping", job_id=job_id)[0]["command_pid"] == program.pid
    wait_gone([program.pid])
    wait_until(lambda: not [p for p in psutil.process_iter() if _group_of(p) == group],
               timeout=10, message=f"process group {group} to be empty")
    assert_never_logged(sup.log_text(), "job_cancel_killed")


def _group_of(process):
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None


def test_a_job_held_in_a_batch_and_cancelled_never_runs(supervisor, queue, db, markers,
                                                        tmp_path):
    """Fast jobs make the child claim in batches; then a gate job and the next are
    claimed together (one due time), and the next one is cancelled while held. The
    gate is opened once the child was told; a job as slow makes the child give its
    batch back (worker.time_job), which ends the held job cancelled. (A held job the
    child was told of before its turn, in a batch of fast jobs, is not started:
    tests/fast/test_cancel_inbox.py.)"""
    sup = supervisor("--workers", "1", "--claim-batch", "10")
    warm = [queue.enqueue(new_job("cancel.quick", markers(f"warm{n}"))) for n in range(20)]
    settled(db, warm[-1], "done")
    due = utc_now() + timedelta(seconds=1.5)
    gate_files = {**markers("gate"), "until": str(tmp_path / "open")}
    gate_id = queue.enqueue(new_job("cancel.gate", gate_files, run_at=due))
    held_files = markers("held")
    held_id = queue.enqueue(new_job("cancel.quick", held_files, run_at=due))
    wait_file(gate_files["started"])
    assert db.row(held_id)["status"] == "reserved"   # one child: held in its batch
    assert queue.cancel([held_id]).stopping == [held_id]
    assert sup.wait_event("job_cancel_sent", job_id=held_id)[0]["running"] is False
    open(gate_files["until"], "w").close()

    settled(db, gate_id, "done")
    row = settled(db, held_id, "cancelled")
    assert row["cancel_requested_at"] is None and row["finished_at"] is not None
    assert not os.path.exists(held_files["finally"])   # never ran


def test_a_job_handed_to_a_child_forked_per_job_is_cancelled_as_it_runs(
        supervisor, queue, db, markers, tmp_path):
    """Forked per job, a child runs the job its parent claimed for it, without a
    session of its own: cancelled as it runs, it connects to end the job cancelled."""
    files = {**markers("handed"), "until": str(tmp_path / "open")}
    job_id = queue.enqueue(new_job("cancel.gate", files))
    sup = supervisor("--workers", "1", "--max-items", "1")
    pid = running_child(sup, job_id)
    wait_file(files["started"])
    assert sup.wait_event("worker_ready", pid=pid)[0]["connection"] is None
    assert queue.cancel([job_id]).stopping == [job_id]
    assert sup.wait_event("job_cancelled", job_id=job_id)[0]["pid"] == pid
    assert_ended_cancelled(settled(db, job_id, "cancelled"))
    assert not sup.events("job_completed_by_supervisor")


def test_a_cancel_during_a_graceful_drain_still_ends_the_job_cancelled(
        supervisor, queue, db, markers):
    files = markers("drain")
    job_id = queue.enqueue(new_job("cancel.wait", files))
    sup = supervisor("--workers", "2", "--graceful-timeout", "60")
    wait_file(files["started"])
    sup.proc.send_signal(signal.SIGTERM)
    sup.wait_event("supervisor_stopping", mode="graceful")
    queue.cancel([job_id])

    sup.wait_event("job_cancelled", job_id=job_id)
    assert sup.wait_exit(timeout=30) == 0
    sup.wait_event("supervisor_stopped")
    assert_ended_cancelled(db.row(job_id))
    assert open(files["finally"]).read() == "finally ran"
    assert_never_logged(sup.log_text(), "job_cancel_killed")


def test_a_handler_ignoring_the_cancel_during_a_drain_is_killed_after_the_grace(
        supervisor, queue, db, markers):
    """The grace, not the drain's longer graceful timeout, bounds a cancelled job."""
    files = markers("drain-stubborn", "caught")
    job_id = queue.enqueue(new_job("cancel.stubborn", files))
    sup = supervisor("--workers", "1", "--graceful-timeout", "120", "--cancel-grace", "1")
    wait_file(files["started"])
    pid = running_child(sup, job_id)
    sup.proc.send_signal(signal.SIGTERM)
    sup.wait_event("supervisor_stopping", mode="graceful")
    queue.cancel([job_id])

    sup.wait_event("job_cancel_killed", job_id=job_id)
    assert sup.wait_event("worker_exited", pid=pid)[0]["reason"] == "cancelled"
    assert sup.wait_exit(timeout=30) == 0
    assert_ended_cancelled(db.row(job_id))


def test_a_soft_timeout_passing_in_a_cancelled_handler_does_not_replace_the_cancel(
        supervisor, queue, db, markers):
    files = markers("timed")
    job_id = queue.enqueue(new_job("cancel.timed", files, max_attempts=3))
    sup = supervisor("--workers", "1", "--cancel-grace", "30")
    wait_file(files["started"])
    queue.cancel([job_id])

    sup.wait_event("job_cancelled", job_id=job_id)
    assert open(files["finally"]).read() == "finally ran"   # it outlasted the soft timeout
    assert_ended_cancelled(db.row(job_id))
    log = sup.log_text()
    assert_never_logged(log, "job_failed")
    assert "soft timeout" not in log


def test_a_job_that_finished_before_the_cancel_stays_done(supervisor, queue, db, markers):
    files = markers("quick")
    job_id = queue.enqueue(new_job("cancel.quick", files))
    sup = supervisor("--workers", "1")
    done = settled(db, job_id, "done")
    report = queue.cancel([job_id])
    assert report.finished == [job_id] and not report.stopping and not report.cancelled
    row = db.row(job_id)
    assert (row["status"], row["finished_at"], row["cancel_requested_at"]) == \
        ("done", done["finished_at"], None)
    assert_never_logged(sup.log_text(), "job_cancelled")


def test_a_cancel_pending_when_its_supervisor_is_killed_ends_at_lease_recovery(
        supervisor, queue, db, markers):
    """The supervisor is frozen (SIGSTOP) so that it cannot act on the cancel, then
    killed with its children: the row stays reserved with its request until the
    lease expires, and the next supervisor's recovery ends the job cancelled."""
    files = markers("orphan")
    job_id = queue.enqueue(new_job("cancel.wait", files))
    lease = "--lease-seconds", "2"
    first = supervisor("--workers", "1", *lease)
    wait_file(files["started"])
    child = running_child(first, job_id)
    os.kill(first.proc.pid, signal.SIGSTOP)
    assert queue.cancel([job_id]).stopping == [job_id]
    first.kill_all()
    wait_gone([first.proc.pid, child])
    row = db.row(job_id)
    assert row["status"] == "reserved" and row["cancel_requested_at"] is not None

    second = supervisor("--workers", "1", *lease)
    row = settled(db, job_id, "cancelled", timeout=30)   # last_error: how it was recovered
    assert row["cancel_requested_at"] is None and row["finished_at"] is not None
    assert not second.events("job_claimed", job_id=job_id)   # never run again
    assert process_gone(child)


def test_the_supervisor_looking_for_cancels_outlives_a_database_outage(
        tmp_path, migrated, mysql_db, store, markers):
    """The parent's database goes away while its child runs a job (the parent looks
    for cancels then); the supervisor lives on, and once the database is back the
    job cancelled meanwhile ends cancelled (its child's connection was cut too: by the
    child's own hand, or by its death's hand-back, which the store ends cancelled)."""
    files = markers("outage")
    queue = store()
    job_id = queue.enqueue(new_job("cancel.wait", files))
    with TcpProxy(SERVER["host"], SERVER["port"]) as proxy, supervisor_starter(
            tmp_path, migrated.replace(f":{SERVER['port']}/", f":{proxy.port}/"),
            *APPS, *FAST_LOOKS) as start:
        sup = start("--workers", "1")
        wait_file(files["started"])
        proxy.cut()
        sup.wait_event("supervisor_db_error")
        queue.cancel([job_id])   # on the server itself, not through the proxy
        sup.wait_event("supervisor_db_unavailable")   # it retries, and lives
        assert sup.proc.poll() is None
        proxy.restore()
        row = settled(mysql_db, job_id, "cancelled", timeout=30)
        assert row["cancel_requested_at"] is None
        assert sup.proc.poll() is None
