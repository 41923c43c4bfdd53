"""A supervisor takes its signals from its first instruction: a stop signal at any
moment of its start-up ends it cleanly (exit 0, no traceback, no process of its
group left, its registry row not left running), and the other signals it handles
wait, then are applied once it runs. Real processes and real signals, on both
backends; the start-up is held at a chosen point by a slow application import
(tests/apps/slow_start_app.py) or a database that does not answer, or a SIGTERM is
sent at moments spread over its first 300 ms. Its handlers are set before it loads
anything but the signals' own module (an audit hook watches its imports).
"""
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from cli_checks import closed_port
from conftest import BACKENDS, SERVER, cli_env, wait_until
from harness import supervisor_starter

from prefork.process_signals import STOP_SIGNALS

APP = ("--app", "slow_start_app", "--workers", "2")
# An exit within EXIT_DEADLINE shows that a held import or connect was cut short:
# either would otherwise last HELD_FOR (the app's gate limit is 60 s too).
EXIT_DEADLINE = 30
HELD_FOR = "120"
HOLD_THE_CONNECT = ("--connect-timeout", HELD_FOR, "--read-timeout", HELD_FOR,
                    "--lock-wait-timeout", HELD_FOR)


# --- the queue under test, and a database that does not answer -----------------------

class MySQLQueue:
    def __init__(self, dsn, conn):
        self.dsn, self.conn = dsn, conn

    def states(self, pid):
        """The registry states of the supervisor with this pid, oldest first."""
        with self.conn.cursor() as cursor:
            cursor.execute("SELECT state FROM prefork_processes WHERE pid = %s ORDER BY id",
                           (pid,))
            return [state for (state,) in cursor.fetchall()]

    def stalled_dsn(self, stack):
        """(a DSN whose connect hangs, wait(sup): until the supervisor is connecting).
        A listener that accepts and never sends the server's greeting."""
        listener = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        listener.settimeout(EXIT_DEADLINE)
        database = self.dsn.rsplit("/", 1)[1]

        def wait(sup):
            connection, _ = listener.accept()
            stack.enter_context(connection)
        return f"mysql://{SERVER['user']}@127.0.0.1:{listener.getsockname()[1]}/{database}", wait


class SQLiteQueue:
    def __init__(self, dsn, path):
        self.dsn, self.path = dsn, path

    def states(self, pid):
        if not self.path.exists():
            return []
        with sqlite3.connect(self.path) as conn:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE name = 'prefork_processes'")
            if not tables.fetchall():
                return []   # stopped before its schema was applied
            rows = conn.execute("SELECT state FROM prefork_processes WHERE pid = ? ORDER BY id",
                                (pid,))
            return [state for (state,) in rows]

    def stalled_dsn(self, stack):
        """A file another connection holds an exclusive lock on (no WAL yet): the
        supervisor's open waits for the lock, up to --lock-wait-timeout."""
        path = self.path.with_name("stalled.db")
        holder = sqlite3.connect(path, isolation_level=None)
        stack.callback(holder.close)
        holder.execute("BEGIN EXCLUSIVE")

        def wait(sup):
            wait_until(lambda: has_open(sup.pid, path), timeout=EXIT_DEADLINE,
                       message=f"the supervisor to open {path}")
        return f"sqlite:///{path}", wait


def has_open(pid, path):
    try:
        return any(Path(f.path) == path for f in psutil.Process(pid).open_files())
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(params=BACKENDS)
def queue(request, tmp_path):
    if request.param == "mysql":
        return MySQLQueue(request.getfixturevalue("migrated"), request.getfixturevalue("clean_db"))
    path = tmp_path / "queue.db"   # not created yet: the supervisor's first open does it
    return SQLiteQueue(f"sqlite:///{path}", path)


@pytest.fixture
def start(tmp_path):
    with supervisor_starter(tmp_path, None, *APP) as start_one:
        yield start_one


@pytest.fixture
def held_import(tmp_path):
    """The environment that holds the application's import until `gate` exists."""
    paths = SimpleNamespace(importing=tmp_path / "importing", gate=tmp_path / "gate",
                            swallowed=tmp_path / "swallowed")
    paths.env = {"PREFORK_TEST_IMPORTING": str(paths.importing),
                 "PREFORK_TEST_IMPORT_GATE": str(paths.gate)}
    return paths


# --- observing a process from outside -------------------------------------------------

def catches(pid, signum):
    """Whether the process has a handler for signum (SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


def group_gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@contextmanager
def signals_blocked(signals):
    """Block signals in this thread, so that a process spawned meanwhile starts with
    them blocked: one sent to it before it can catch it waits instead of killing it."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def assert_stopped_cleanly(sup, queue):
    status = sup.wait_exit(timeout=EXIT_DEADLINE)
    log = sup.log_text()
    assert status == 0, f"exit status {status}; log tail:\n{log[-2000:]}"
    assert "Traceback" not in log, log
    wait_until(lambda: group_gone(sup.pid), timeout=15, message="its process group to end")
    assert "running" not in queue.states(sup.pid)


# --- the points of the start-up a stop signal is sent at ----------------------------------

def right_after_spawn(start, queue, held_import, stack):
    """Before the interpreter has run one line of ours: the launcher starts it with the
    stop signals blocked, as tests/chaos.py should, and the signal waits for it."""
    with signals_blocked(STOP_SIGNALS):
        return start(env={"PREFORK_QUEUE_DSN": queue.dsn})


def once_it_catches_signals(start, queue, held_import, stack):
    """The first moment a signal cannot kill it: its handler for SIGTERM is set
    (reading its config, or importing the application, comes next)."""
    sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn})
    wait_until(lambda: catches(sup.pid, signal.SIGTERM), timeout=EXIT_DEADLINE, interval=0.001,
               message="the supervisor to catch SIGTERM")
    return sup


def while_importing_the_application(start, queue, held_import, stack):
    sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn, **held_import.env})
    wait_until(held_import.importing.exists, timeout=EXIT_DEADLINE,
               message="the application's import to begin")
    return sup


def while_connecting(start, queue, held_import, stack):
    dsn, wait_connecting = queue.stalled_dsn(stack)
    sup = start(*HOLD_THE_CONNECT, env={"PREFORK_QUEUE_DSN": dsn})
    wait_connecting(sup)
    return sup


def while_forking_the_first_children(start, queue, held_import, stack):
    sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn})
    sup.wait_event("supervisor_started", timeout=EXIT_DEADLINE)
    return sup


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("reach", [right_after_spawn, once_it_catches_signals,
                                   while_importing_the_application, while_connecting,
                                   while_forking_the_first_children], ids=lambda f: f.__name__)
def test_a_stop_signal_at_any_point_of_the_start_up_stops_it_cleanly(
        reach, signum, queue, start, held_import):
    with ExitStack() as stack:
        sup = reach(start, queue, held_import, stack)
        sup.signal(signum)
        assert_stopped_cleanly(sup, queue)
    name = signal.Signals(signum).name
    if reach in (while_importing_the_application, while_connecting):
        [stopped] = sup.events("supervisor_stopped")
        assert (stopped["during"], stopped["signal"]) == ("start-up", name)
        assert queue.states(sup.pid) == []   # it never registered
    if reach is while_forking_the_first_children:
        assert sup.events("supervisor_stopping")[0]["signal"] == name
        assert queue.states(sup.pid) == ["stopped"]


def test_other_signals_wait_for_the_supervisor_and_are_applied_once_it_runs(
        queue, start, held_import):
    sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn, **held_import.env})
    wait_until(held_import.importing.exists, timeout=EXIT_DEADLINE,
               message="the application's import to begin")
    for signum in (signal.SIGHUP, signal.SIGUSR1, signal.SIGTTIN):   # each deadly, or a stop
        sup.signal(signum)
    held_import.gate.touch()
    sup.wait_event("supervisor_started", timeout=EXIT_DEADLINE)
    sup.wait_event("config_reloaded", generation=1)
    sup.wait_event("logs_reopened")
    sup.wait_event("workers_changed", workers=3, signal="SIGTTIN")
    sup.wait_children(3, timeout=EXIT_DEADLINE)
    assert [len(sup.events(name)) for name in ("config_reloaded", "logs_reopened",
                                               "workers_changed")] == [1, 1, 1]
    sup.signal(signal.SIGTERM)
    assert_stopped_cleanly(sup, queue)
    assert queue.states(sup.pid) == ["stopped"]


def test_a_stop_the_application_swallows_still_ends_the_start_up_before_it_registers(
        queue, start, held_import):
    sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn, **held_import.env,
                     "PREFORK_TEST_SWALLOW_STOP": str(held_import.swallowed)})
    wait_until(held_import.importing.exists, timeout=EXIT_DEADLINE,
               message="the application's import to begin")
    sup.signal(signal.SIGTERM)
    assert_stopped_cleanly(sup, queue)
    assert held_import.swallowed.read_text() == "StartupStopped"
    assert queue.states(sup.pid) == []
    assert sup.events("supervisor_stopped")[0]["during"] == "start-up"


# --- a SIGTERM at any moment of the first 300 ms -------------------------------------------

STARTS = 7   # SIGTERMs 0, 50, ..., 300 ms after exec
SPREAD = 0.3


def test_a_sigterm_in_the_first_300_ms_after_exec_stops_it_cleanly_each_time(queue, start):
    """The launcher holds the stop signals blocked across exec (as systemd does not, but
    tests/chaos.py and the bench do), so that one sent during the interpreter's own start
    waits for the supervisor's handlers, which come before any of its imports."""
    for number in range(STARTS):
        with signals_blocked(STOP_SIGNALS):
            sup = start(env={"PREFORK_QUEUE_DSN": queue.dsn})
        time.sleep(SPREAD * number / (STARTS - 1))   # the moment of the signal, not a wait
        sup.signal(signal.SIGTERM)
        assert_stopped_cleanly(sup, queue)


# --- the handlers come first ---------------------------------------------------------------

# What `prefork-queue run` loads before its handlers are set: the console script's
# module and what it imports, and no more.
BEFORE_THE_HANDLERS = {"prefork", "prefork.cli", "prefork.cli.main", "prefork.supervisor",
                       "prefork.supervisor.startup", "prefork.process_signals"}
WATCHED_IMPORTS = """import atexit, json, signal, sys
imported = []

def watch(event, args):
    if event == "import" and args[0].split(".")[0] in ("prefork", "pymysql"):
        imported.append([args[0], signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL])

sys.addaudithook(watch)
atexit.register(lambda: print(json.dumps(imported), file=sys.stderr))
sys.argv = ["prefork-queue", "run", "--app", "ledger_app", "--connect-timeout", "5"]
from prefork.cli.main import main
sys.exit(main())
"""


def test_the_stop_handlers_are_set_before_the_store_and_the_drivers_are_loaded():
    """The console script's own lines, in an interpreter whose every import of ours is
    watched: each module loaded after the first few finds SIGTERM handled. (The run
    ends when its connect to a closed port fails: everything is loaded by then.)"""
    with closed_port() as port:
        address = f"127.0.0.1:{port}"
        result = subprocess.run([sys.executable, "-c", WATCHED_IMPORTS], capture_output=True,
                                text=True, timeout=60,
                                env=cli_env(f"mysql://{SERVER['user']}@{address}/jobs"))
    assert "cannot connect" in result.stderr and address in result.stderr, result.stderr
    imported = json.loads(result.stderr.splitlines()[-1])
    unhandled = {module for module, handled in imported if not handled}
    assert unhandled <= BEFORE_THE_HANDLERS, sorted(unhandled - BEFORE_THE_HANDLERS)
    handled = {module for module, handled in imported if handled}
    assert {"pymysql", "prefork.store.contract", "prefork.supervisor.loop"} <= handled
