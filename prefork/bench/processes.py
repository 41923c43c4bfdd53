"""The processes a bench run starts: the real supervisor (a subprocess) and the
textbook baseline (forked children). Both die with the bench (PR_SET_PDEATHSIG),
and stop() always ends them: SIGTERM, then SIGKILL after a deadline."""
import os
import select
import signal
import subprocess
import sys
import time

import psutil

from ..config import SETTINGS
from ..errors import UserError
from ..process_signals import die_with_parent
from ..store.mysql.bench import textbook_loop

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
POLL = 0.02
MIB = 1024 * 1024
# Settings the bench chooses itself for the supervisor it starts.
CHOSEN_BY_BENCH = {"app", "queues", "workers", "log_level", "log_format", "log_file"}


class BenchError(UserError):
    """A bench run could not go on (a process died, a deadline passed)."""


def supervisor_env(config, extra):
    """The environment of the supervisor: the bench's settings (DSN, password, timeouts)
    as PREFORK_QUEUE_* variables, never as flags; nothing inherited of ours."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFORK_QUEUE_")}
    for setting in SETTINGS:
        value = getattr(config, setting.name)
        if setting.name in CHOSEN_BY_BENCH or value is None or \
                config.source(setting.name) == "default":
            continue
        env[setting.env_name] = ",".join(value) if isinstance(value, list) else str(value)
    env.update(extra)
    return env


class SupervisorProcess:
    """`python -m prefork run` on the scratch queue, with its logs in a file."""

    def __init__(self, workers, queue, env, log_path):
        self.workers = workers
        self.command = [sys.executable, "-m", "prefork", "run", "--app", "prefork.bench.jobs",
                        "--queues", queue, "--workers", str(workers), "--log-level", "warning",
                        "--log-format", "json"]
        self.env, self.log_path = env, log_path
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True, preexec_fn=die_with_parent)

    def wait_idle(self, timeout=START_TIMEOUT):
        """Until all children are up: connected, schema checked, their title `idle`."""
        deadline = time.monotonic() + timeout
        while len(self._idle_children()) < self.workers:
            self.check_alive()
            if time.monotonic() > deadline:
                self.fail(f"its {self.workers} workers were not idle within {timeout:g}s")
            time.sleep(POLL)

    def _idle_children(self):
        idle = []
        for child in self.children():
            try:
                if " idle" in " ".join(child.cmdline()):
                    idle.append(child)
            except psutil.Error:
                pass
        return idle

    def children(self):
        try:
            return psutil.Process(self.proc.pid).children()
        except psutil.Error:
            return []

    def memory(self):
        """{parent_rss, child_rss, child_uss} in MiB now; the children's figures are
        the largest of them. USS: pages only that child has (not shared copy-on-write)."""
        sample = {"parent_rss": psutil.Process(self.proc.pid).memory_info().rss / MIB}
        rss, uss = [], []
        for child in self.children():
            try:
                info = child.memory_full_info()
            except psutil.Error:
                continue
            rss.append(info.rss / MIB)
            uss.append(info.uss / MIB)
        sample["child_rss"] = max(rss, default=None)
        sample["child_uss"] = max(uss, default=None)
        return sample

    def cpu_seconds(self):
        """{"parent", "children"}: CPU seconds (user + system) used so far."""
        return {"parent": _cpu_seconds([psutil.Process(self.proc.pid)]),
                "children": _cpu_seconds(self.children())}

    def check_alive(self):
        if self.proc.poll() is not None:
            self.fail(f"it exited with status {self.proc.returncode}")

    def fail(self, what):
        raise BenchError(f"the supervisor ({self.workers} workers) failed: {what}; "
                         f"its log: {self.log_tail()}")

    def log_tail(self, limit=600):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()[-limit:].strip() or "(empty)"
        except OSError:
            return "(none)"

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM (a graceful drain), wait; past the deadline SIGKILL its whole session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        _kill_session(self.proc.pid)
        self.proc.wait()


def _cpu_seconds(processes):
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _kill_session(pid):
    """SIGKILL what is left of the session the supervisor leads (its children too)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class BaselinePool:
    """N forked processes running the textbook loop on the scratch queue."""

    def __init__(self, config, queue, workers):
        self.config, self.queue, self.workers = config, queue, workers
        self.pids = []
        self.ready_fd = None

    def start(self):
        read_fd, write_fd = os.pipe()
        self.ready_fd = read_fd
        sys.stdout.flush()
        sys.stderr.flush()
        for _ in range(self.workers):
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _baseline_child(self.config, self.queue, write_fd)   # never returns
            self.pids.append(pid)
        os.close(write_fd)

    def wait_ready(self, timeout=START_TIMEOUT):
        """Until every process has its connection open (one byte each on the pipe)."""
        deadline, ready = time.monotonic() + timeout, 0
        while ready < self.workers:
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"the baseline's {self.workers} processes did not connect "
                                 f"within {timeout:g}s")
            readable, _, _ = select.select([self.ready_fd], [], [], POLL)
            if readable:
                ready += len(os.read(self.ready_fd, self.workers))

    def cpu_seconds(self):
        """{"parent": 0 (the bench itself), "children"}: CPU seconds used so far."""
        return {"parent": 0.0, "children": _cpu_seconds(psutil.Process(pid) for pid in self.pids)}

    def memory(self):
        return {}

    def check_alive(self):
        for pid in self.pids:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.pids.remove(pid)
                raise BenchError(f"a baseline process died ({_describe(status)})")

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM (each finishes its job), wait; past the deadline SIGKILL."""
        for pid in self.pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.pids and time.monotonic() < deadline:
            self.pids = [pid for pid in self.pids if not os.waitpid(pid, os.WNOHANG)[0]]
            time.sleep(POLL)
        for pid in self.pids:
            _signal(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        self.pids = []
        if self.ready_fd is not None:
            os.close(self.ready_fd)
            self.ready_fd = None


def _baseline_child(config, queue, ready_fd):
    """A forked baseline process: the textbook loop until SIGTERM; never returns."""
    code = 1
    try:
        stopping = []
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the bench's to handle
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
        die_with_parent()
        textbook_loop(config, queue, should_stop=lambda: bool(stopping),
                      on_ready=lambda: os.write(ready_fd, b"r"))
        code = 0
    except BaseException as exc:   # never fall back into the bench's code
        os.write(2, f"baseline process: {type(exc).__name__}\n".encode())
    finally:
        os._exit(code)


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _describe(status):
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.WEXITSTATUS(status)}"
