"""A new user's first run, from the README: no server, no config, no --app."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import suppress

import psutil
import pytest
from conftest import cli_env, wait_until
from harness import catalogued, titles, wait_gone


def in_dir(tmp_path, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "prefork", *args], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=timeout)


def job_statuses(path):
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT idempotency_key, status FROM prefork_jobs"))


def enqueue(tmp_path, *args):
    """`prefork-queue enqueue ARGS` in tmp_path; the new job's id."""
    result = in_dir(tmp_path, "enqueue", *args)
    assert result.returncode == 0 and result.stdout.strip().isdigit(), result.stderr
    return int(result.stdout)


def titles_of_tree(pid):
    """{pid: title} of the supervisor `pid` and its children, nothing else on the machine."""
    try:
        pids = [pid] + [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return {}
    return titles(pids)


def test_first_run_needs_no_server_and_no_app(tmp_path):
    log = open(tmp_path / "sup.log", "w")
    sup = subprocess.Popen([sys.executable, "-m", "prefork", "--workers", "3", "--log-format",
                            "json", "--retry-base", "0.05"], cwd=tmp_path, env=cli_env(),
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        database = tmp_path / "prefork-queue.db"
        wait_until(lambda: database.exists(), message="the SQLite file")
        sleeping = enqueue(tmp_path, "sleep", '{"seconds": 3}', "--key", "s")
        # While it sleeps, a child's title says so (read before the other jobs are
        # enqueued: a slow machine must not let the sleep end first).
        busy = f"busy job {sleeping} sleep"
        wait_until(lambda: (lambda tree: any(busy in title for title in tree.values()) and
                            "prefork-queue master [default] workers 3/3" in tree.get(sup.pid, ""))(
            titles_of_tree(sup.pid)), message=f"the master's title and a child's ({busy})")
        for args in (["fail-n-times", '{"times": 2}', "--key", "f"],
                     ["fail-n-times", '{"times": 9}', "--key", "d", "--max-attempts", "2"],
                     ["report", '{"title": "weekly"}', "--key", "r"]):
            enqueue(tmp_path, *args)
        expected = {"s": "done", "f": "done", "d": "dead", "r": "done"}
        wait_until(lambda: job_statuses(database) == expected, timeout=30,
                   message=f"jobs to end as {expected}")
        failed = in_dir(tmp_path, "failed")
        assert failed.returncode == 0 and "fail-n-times" in failed.stdout
        assert list((tmp_path / "prefork-reports").glob("report-*.json"))
        children = [child.pid for child in psutil.Process(sup.pid).children()]
        sup.send_signal(signal.SIGINT)
        assert sup.wait(timeout=20) == 0
        wait_gone(children)
    finally:
        with suppress(ProcessLookupError):   # its session: the parent and any child left
            os.killpg(sup.pid, signal.SIGKILL)
        sup.wait(timeout=10)
        log.close()
    events = [json.loads(line)["event"] for line in (tmp_path / "sup.log").read_text().splitlines()
              if line.startswith("{")]
    assert catalogued("example_handlers") in events and catalogued("supervisor_stopped") in events


@pytest.mark.parametrize("args,words", [
    (["--workers", "2", "--dsn", "sqlite:///q.db"], "--app"),
    (["work", "--dsn", "sqlite:///q.db", "--once"], "--app"),
])
def test_a_configured_database_requires_an_app(tmp_path, args, words):
    # The queue database exists (a missing one is refused first, and for that reason).
    assert in_dir(tmp_path, "migrate", "--dsn", "sqlite:///q.db").returncode == 0
    result = in_dir(tmp_path, *args)
    assert result.returncode == 2 and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
