"""Nothing a local user or a clumsy operator does may end the supervisor (issue 11,
items 1-3 and the log file of 12): a real supervisor, real datagrams on its doorbell,
real pre-created paths, real SIGHUP and SIGUSR1; each time it keeps running and
still works a job afterwards.

Each test gives the supervisor (and its own process, which rings as a producer) a
doorbell base of its own through XDG_RUNTIME_DIR, never the temp folder other runs use."""
import logging
import os
import signal
import socket
import stat
from pathlib import Path

import pytest
from conftest import APPS, ROOT, job_row, wait_until
from harness import EventLog, supervisor_starter

from prefork import logs
from prefork.jobs import new_job
from prefork.wakeups import doorbell

NOBODY = 65534


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db, bell_base):
    """start(*args, **kwargs): a supervisor with the ledger app and this test's bell base."""
    with supervisor_starter(tmp_path, migrated, "--app", "ledger_app") as start:
        def start_here(*args, env=None, **kwargs):
            return start(*args, env={"XDG_RUNTIME_DIR": str(bell_base), **(env or {})}, **kwargs)
        yield start_here


@pytest.fixture
def producer(store):
    return store()


@pytest.fixture
def works_a_job(producer, clean_db):
    """works_a_job(sup, key): enqueue a job (the store rings this test's bell base) and
    see it done, the supervisor still running."""
    def work(sup, key, timeout=20):
        job_id = producer.enqueue(new_job("noop", {}, key=key))
        wait_until(lambda: job_row(clean_db, job_id)["status"] == "done", timeout=timeout,
                   message=f"job {key} done; supervisor exit status {sup.proc.poll()}")
        assert sup.proc.poll() is None
    return work


def bell_top(bell_base):
    return bell_base / f"prefork-queue-{os.getuid()}"


# -- 1. the doorbell's datagrams -------------------------------------------------------

GARBAGE = ["default ²".encode(), "default ٣".encode(), b"default 1\n", b"default -5",
           b"default " + b"9" * 500, b"\xff\xfe\xfd", b"", b" ", b"default", b"default\n 1",
           b"x" * 512, "défaut 1".encode(), b"default 1 2", b"\x00\x00 7"]


def test_garbage_datagrams_on_the_doorbell_are_ignored(supervisor, producer, works_a_job):
    """A poll interval of a minute: the job is found within the deadline only by its ring,
    so the doorbell still works after the garbage."""
    sup = supervisor("--workers", "1", "--poll-interval", "60")
    sup.wait_event("worker_ready")
    bell = Path(doorbell.bell_directory(producer.bell_key)) / f"{sup.pid}.sock"
    wait_until(bell.exists, message="the supervisor's bell")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        for data in GARBAGE * 3:
            sock.sendto(data, str(bell))
    works_a_job(sup, "after-garbage")
    assert not sup.events("supervisor_step_failed")


# -- 2. the doorbell's directory ---------------------------------------------------------

def test_a_file_where_the_bell_directory_goes_leaves_polling(supervisor, works_a_job,
                                                             bell_base):
    planted = bell_top(bell_base)
    planted.write_text("not a directory\n")
    sup = supervisor("--workers", "1", "--poll-interval", "0.2")
    warning = sup.wait_event("doorbell_unavailable")[0]
    assert (warning["level"], warning["path"], warning["problem"]) == \
        ("warning", str(planted), "is not a directory")
    works_a_job(sup, "polled")
    assert planted.read_text() == "not a directory\n"


def _others_directory(top, how):
    """What another local user leaves where our bell directory goes."""
    if how == "a link":
        theirs = top.with_name("theirs")
        theirs.mkdir()
        theirs.chmod(0o777)
        top.symlink_to(theirs)
        return
    top.mkdir()
    if how == "open to all":
        top.chmod(0o777)
    else:
        top.chmod(0o700)
        os.chown(top, NOBODY, NOBODY)   # as another local user made it


@pytest.mark.parametrize("how, problem", [
    ("open to all", "has mode 0777: others may write in it"),
    ("owned by another uid", f"is owned by uid {NOBODY}, not by us ({os.getuid()})"),
    ("a link", "is a symbolic link"),
])
def test_a_directory_someone_else_controls_gets_no_ring(supervisor, producer, works_a_job,
                                                        bell_base, how, problem):
    """Their socket waits where our bell would be: neither our supervisor's bell nor a
    producer's ring (queue names) may go there."""
    top = bell_top(bell_base)
    _others_directory(top, how)
    leaf = Path(doorbell.bell_directory(producer.bell_key))
    leaf.mkdir(mode=0o777)
    leaf.chmod(0o777)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as theirs:
        theirs.bind(str(leaf / "theirs.sock"))
        theirs.setblocking(False)
        sup = supervisor("--workers", "1", "--poll-interval", "0.2")
        warning = sup.wait_event("doorbell_unavailable")[0]
        assert (warning["path"], warning["problem"]) == (str(top), problem)
        works_a_job(sup, "secret-queue-job")
        doorbell.ring(producer.bell_key, {"payroll-export": 3})
        with pytest.raises(BlockingIOError):
            theirs.recv(512)
    assert sorted(os.listdir(leaf)) == ["theirs.sock"]   # no bell of ours in there
    assert stat.S_IMODE(top.stat().st_mode) == (0o700 if how == "owned by another uid" else 0o777)


def test_our_own_bell_directory_left_0755_is_made_private(supervisor, works_a_job, bell_base):
    """Older versions left the top level 0755 (ours, nobody else could write in it):
    the supervisor takes group and other access away and keeps its doorbell."""
    top = bell_top(bell_base)
    top.mkdir()
    top.chmod(0o755)
    sup = supervisor("--workers", "1", "--poll-interval", "60")
    sup.wait_event("worker_ready")
    assert stat.S_IMODE(top.stat().st_mode) == 0o700
    works_a_job(sup, "rung")
    assert not sup.events("doorbell_unavailable")


# -- 3. reloads and log reopens ------------------------------------------------------------

def _reload_with(sup, config_bytes):
    sup.config_path.write_bytes(config_bytes)
    sup.signal(signal.SIGHUP)
    return sup.wait_event("config_reload_failed")[0]


def test_sighup_with_a_non_utf8_config_file_keeps_the_old_config(supervisor, works_a_job):
    sup = supervisor(config_text="[prefork-queue]\nworkers = 1\n")
    old = {sup.wait_event("worker_ready")[0]["pid"]}
    failed = _reload_with(sup, b"[prefork-queue]\n# caf\xe9\nworkers = 2\n")
    assert "\n" not in failed["error"] and "Traceback" not in failed["error"]
    works_a_job(sup, "after-latin1")
    assert {child.pid for child in sup.children()} == old
    assert not sup.events("config_reloaded")


def test_sighup_with_a_log_file_in_a_missing_folder_keeps_the_old_config(supervisor,
                                                                         works_a_job):
    sup = supervisor(config_text="[prefork-queue]\nworkers = 1\n")
    old = {sup.wait_event("worker_ready")[0]["pid"]}
    failed = _reload_with(sup, b"[prefork-queue]\nworkers = 2\nlog_file = /missing/dir/x.log\n")
    assert failed["error"] == "No such file or directory: /missing/dir/x.log"
    works_a_job(sup, "after-missing-log")
    assert {child.pid for child in sup.children()} == old
    assert sup.events("job_completed")   # still logging where it did


def test_sigusr1_after_the_log_folder_moved_keeps_the_old_log(supervisor, works_a_job, tmp_path):
    """The log file is also created 0600 (issue 11, item 12), the umask notwithstanding."""
    folder = tmp_path / "logs"
    folder.mkdir()
    sup = supervisor("--workers", "1", "--log-file", str(folder / "sup.log"))
    log = EventLog(folder / "sup.log")
    wait_until(lambda: log.path.exists() and log.events("worker_ready"),
               message="worker_ready in the log file")
    assert stat.S_IMODE((folder / "sup.log").stat().st_mode) == 0o600
    folder.rename(tmp_path / "moved")
    log.path = tmp_path / "moved" / "sup.log"
    sup.signal(signal.SIGUSR1)
    failed = wait_until(lambda: log.events("log_reopen_failed"), message="log_reopen_failed")[0]
    assert failed["error"] == f"No such file or directory: {folder / 'sup.log'}"
    works_a_job(sup, "after-moved-log")
    wait_until(lambda: log.events("job_completed"), message="job_completed in the old log")
    assert not log.events("logs_reopened")


def test_an_existing_log_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared.log"
    path.write_text("")
    path.chmod(0o640)
    saved = list(logs.LOGGER.handlers), logs.LOGGER.level
    try:
        logs.configure("json", "info", str(path))
        logs.event("logs_reopened")
    finally:
        for handler in list(logs.LOGGER.handlers):
            logs.LOGGER.removeHandler(handler)
            handler.close()
        for handler in saved[0]:
            logs.LOGGER.addHandler(handler)
        logs.LOGGER.setLevel(saved[1] or logging.NOTSET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert '"event":"logs_reopened"' in path.read_text()


FAULTY_APP = '''
"""Makes a signal's handler and an observer raise what nobody expects."""
import math

from prefork import observers
from prefork.supervisor import loop


def handle_sigttin(self):
    raise RuntimeError("a bug in a handler")


class FaultyObserver:
    ticks = 0

    def notify(self, name, fields):
        if name == "started":
            raise KeyError("a bug in notify")

    def tick(self, now, view):
        FaultyObserver.ticks += 1
        if FaultyObserver.ticks == 3:
            raise ValueError("a bug in tick")

    def next_deadline(self):
        return math.inf


loop.Supervisor.handle_sigttin = handle_sigttin
_build = observers.build
observers.build = lambda config: _build(config) + [FaultyObserver()]
'''


def test_a_handler_or_an_observer_that_raises_is_logged_and_survived(supervisor, works_a_job,
                                                                     tmp_path):
    (tmp_path / "faulty_app.py").write_text(FAULTY_APP)
    path = os.pathsep.join([str(tmp_path), str(APPS), str(ROOT)])
    sup = supervisor("--workers", "1", "--app", "ledger_app,faulty_app",
                     env={"PYTHONPATH": path})
    sup.wait_event("worker_ready")
    sup.signal(signal.SIGTTIN)
    failures = {}
    for step in ("FaultyObserver.notify", "FaultyObserver.tick", "handle_sigttin"):
        failures[step] = sup.wait_event("supervisor_step_failed", step=step)[0]
    assert {step: (e["level"], e["error"]) for step, e in failures.items()} == {
        "FaultyObserver.notify": ("error", "KeyError"),
        "FaultyObserver.tick": ("error", "ValueError"),
        "handle_sigttin": ("error", "RuntimeError")}
    assert failures["handle_sigttin"]["traceback"].startswith("Traceback")
    assert "a bug in a handler" in failures["handle_sigttin"]["traceback"]
    works_a_job(sup, "after-faults")
