"""`prefork-queue run --reload true` as a developer runs it: the real CLI in a directory
holding the application's file, which the test edits; real processes and signals."""
import os
import signal
import subprocess
import sys

import psutil
import pytest
from cli_checks import assert_refused
from conftest import cli_env, run_cli, wait_until
from harness import EventLog, catalogued

APP = "edited_app"
HANDLER = '''import os
import time

import prefork


@prefork.handler("version")
def version(job):
    time.sleep(job.payload.get("seconds", 0))
    with open(os.environ["RELOAD_OUT"], "a") as out:
        out.write("{version} %d\\n" % job.id)
'''
BROKEN = "import prefork\n\ndef version(job:\n"


class Watcher:
    """`python -m prefork run --reload true --app edited_app` in tmp_path, its JSON log
    (stdout and stderr) in a file, the jobs' output in another."""

    def __init__(self, tmp_path, dsn, *args):
        self.dir, self.dsn = tmp_path, dsn
        self.out = tmp_path / "out.txt"
        self.log_path = tmp_path / "run.log"
        self.log = EventLog(self.log_path)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "prefork", "run", "--reload", "true", "--app", APP,
                 "--workers", "1", "--log-format", "json", *args],
                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=cli_env(dsn, RELOAD_OUT=str(self.out)), start_new_session=True)
        self.seen = {self.proc.pid}

    def write_app(self, text):
        (self.dir / f"{APP}.py").write_text(text)

    def events(self, name, **fields):
        return self.log.events(name, **fields)

    def wait_event(self, name, count=1, timeout=20, **fields):
        try:
            return wait_until(lambda: (lambda hits: hits if len(hits) >= count else None)(
                self.events(name, **fields)), timeout=timeout, message=f"{count} x {name}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; log:\n{self.log_path.read_text()[-3000:]}") from None

    def processes(self):
        """The watcher and every process under it now (remembered for the teardown)."""
        try:
            tree = [psutil.Process(self.proc.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        self.seen.update(process.pid for process in tree)
        return tree

    def enqueue(self, payload="{}"):
        result = run_cli("enqueue", "version", payload, dsn=self.dsn)
        assert result.returncode == 0, result.stderr
        return int(result.stdout)

    def wait_output(self, line):
        wait_until(lambda: self.out.exists() and line in self.out.read_text().splitlines(),
                   timeout=20, message=f"the job's output {line!r}")

    def supervisor_pids(self):
        return [e["pid"] for e in self.events("supervisor_started")]

    def kill_all(self):
        for pid in self.seen | {p.pid for p in self.processes()}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)


@pytest.fixture
def watchers(tmp_path, sqlite_migrated):
    started = []

    def start(first_version, *args):
        (tmp_path / f"{APP}.py").write_text(first_version)
        watcher = Watcher(tmp_path, sqlite_migrated, *args)
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.kill_all()


def stop_and_check_nothing_is_left(watcher, signum=signal.SIGTERM):
    tree = watcher.processes()
    assert len(tree) >= 1
    os.kill(watcher.proc.pid, signum)
    assert watcher.proc.wait(timeout=30) == 0, watcher.log_path.read_text()[-3000:]
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == [], alive


def test_an_edit_restarts_the_supervisor_and_jobs_after_it_run_the_new_code(watchers):
    watcher = watchers(HANDLER.format(version="v1"))
    watcher.wait_event("supervisor_started")
    assert watcher.events("reload_watching")[0]["files"] == 1   # edited_app.py only
    first = watcher.enqueue()
    watcher.wait_output(f"v1 {first}")

    watcher.write_app(HANDLER.format(version="version-2"))
    changed = watcher.wait_event("reload_changed")[0]
    assert changed["file"] == str(watcher.dir / f"{APP}.py")
    watcher.wait_event("supervisor_started", count=2)
    old, new = watcher.supervisor_pids()
    assert old != new and not psutil.pid_exists(old)
    second = watcher.enqueue()
    watcher.wait_output(f"version-2 {second}")

    # A syntax error: the new supervisor fails at start, once (one line, no loop);
    # a job enqueued meanwhile waits, and runs the fixed code.
    watcher.write_app(BROKEN)
    watcher.wait_event("reload_supervisor_failed")
    waiting = watcher.enqueue()
    watcher.write_app(HANDLER.format(version="fixed-3"))
    watcher.wait_event("supervisor_started", count=3)
    watcher.wait_output(f"fixed-3 {waiting}")
    assert len(watcher.events("reload_supervisor_failed")) == 1
    assert len(watcher.events(catalogued("reload_changed"))) == 3
    errors = [line for line in watcher.log_path.read_text().splitlines()
              if line.startswith("prefork-queue: error:")]
    assert len(errors) == 1 and "SyntaxError" in errors[0] and APP in errors[0], errors
    assert "Traceback" not in watcher.log_path.read_text()

    stop_and_check_nothing_is_left(watcher)


def test_a_job_running_at_the_change_finishes_on_the_old_code(watchers):
    watcher = watchers(HANDLER.format(version="old"))
    watcher.wait_event("supervisor_started")
    running = watcher.enqueue('{"seconds": 1.5}')
    watcher.wait_event("job_claimed", job_id=running)
    watcher.write_app(HANDLER.format(version="new-code"))
    watcher.wait_event("supervisor_started", count=2)
    # The old supervisor drained before the new one started: the job ended first.
    assert f"old {running}" in watcher.out.read_text().splitlines()
    assert watcher.events("job_completed", job_id=running)
    after = watcher.enqueue()
    watcher.wait_output(f"new-code {after}")
    stop_and_check_nothing_is_left(watcher, signal.SIGINT)


def test_an_application_broken_at_start_is_tried_again_at_the_next_change(watchers):
    watcher = watchers(BROKEN)
    watcher.wait_event("reload_supervisor_failed")
    assert watcher.events("supervisor_started") == []
    watcher.write_app(HANDLER.format(version="works"))
    watcher.wait_event("supervisor_started")
    job = watcher.enqueue()
    watcher.wait_output(f"works {job}")
    watcher.write_app(BROKEN)
    watcher.wait_event("reload_supervisor_failed", count=2)
    stop_and_check_nothing_is_left(watcher)   # no supervisor to wait for: exits 0 at once


def test_reload_is_refused_under_systemd(sqlite_migrated, tmp_path):
    result = run_cli("run", "--reload", "true", "--app", "ledger_app", dsn=sqlite_migrated,
                     NOTIFY_SOCKET=str(tmp_path / "notify"))
    assert_refused(result, "--reload is for development", "NOTIFY_SOCKET")


def test_the_config_file_is_watched_and_signals_are_forwarded(watchers, tmp_path):
    config = tmp_path / "dev.conf"
    config.write_text("[prefork-queue]\nqueues = default\n")
    watcher = watchers(HANDLER.format(version="v1"), "--config", str(config))
    watcher.wait_event("supervisor_started", queues="default")
    config.write_text("[prefork-queue]\nqueues = default,mail\n")
    watcher.wait_event("reload_changed", file=str(config))
    watcher.wait_event("supervisor_started", queues="default,mail")
    os.kill(watcher.proc.pid, signal.SIGTTIN)   # the watcher forwards the supervisor's signals
    watcher.wait_event("workers_changed", workers=2, signal="SIGTTIN")
    stop_and_check_nothing_is_left(watcher)
