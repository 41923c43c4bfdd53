"""The processes a bench run starts: the real supervisor (a subprocess) and the
textbook baseline (forked children). Both die with the bench (PR_SET_PDEATHSIG),
and stop() always ends them: SIGTERM, then SIGKILL after a deadline.

SupervisorProcess is also what the tests and the chaos soak start
(tests/harness.py adds what only they need: reading the JSON events, titles)."""
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import psutil

from ..config import Config
from ..settings import SETTINGS
from ..errors import UserError
from ..process_signals import block_stop_signals, die_with_parent, preexec_die_with_parent
from ..store.mysql.bench import ceiling_loop, textbook_loop

# A loop of the baseline's kind: (config, queue, should_stop=, on_ready=) -> jobs completed.
Loop = Callable[..., int]

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
KILL_TIMEOUT = 10.0
POLL = 0.02
MIB = 1024 * 1024
# Settings the bench chooses itself for the supervisor it starts.
CHOSEN_BY_BENCH = {"app", "queues", "workers", "log_level", "log_format", "log_file",
                   "reload"}   # never: the bench measures the supervisor, not a watcher


class BenchError(UserError):
    """A bench run could not go on (a process died, a deadline passed)."""


def supervisor_env(config: Config, extra: Mapping[str, str]) -> Dict[str, str]:
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
    """`python -m prefork run ARGS` leading a session of its own (its children in it),
    stdout and stderr appended to `log_path`. It gets SIGTERM should its starter die;
    stop() drains it, kill() ends the whole session at once."""

    # Start with the stop signals blocked (see block_stop_signals): for a launcher
    # that may stop the supervisor within milliseconds of starting it.
    block_stop_signals_at_start = False

    def __init__(self, args: Sequence[str], env: Mapping[str, str], log_path: Path,
                 label: str = "the supervisor", cwd: Optional[Path] = None) -> None:
        self.command = [sys.executable, "-m", "prefork", "run", *args]
        self.env, self.log_path, self.label, self.cwd = dict(env), Path(log_path), label, cwd
        self.proc: Optional["subprocess.Popen[bytes]"] = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                         start_new_session=True,
                                         preexec_fn=preexec_die_with_parent(
                                             signal.SIGTERM, then=self._prepare_signals()))

    def _prepare_signals(self) -> Optional[Callable[[], None]]:
        return block_stop_signals if self.block_stop_signals_at_start else None

    @property
    def pid(self) -> int:
        return self.started().pid

    def started(self) -> "subprocess.Popen[bytes]":
        if self.proc is None:
            raise RuntimeError(f"{self.label} was not started")
        return self.proc

    # -- its children -------------------------------------------------------------

    def children(self) -> List[psutil.Process]:
        """Its children now, exited ones (zombies not yet reaped) left out."""
        try:
            return [child for child in psutil.Process(self.pid).children()
                    if child.status() != psutil.STATUS_ZOMBIE]
        except psutil.Error:
            return []

    def wait_idle(self, workers: int, timeout: float = START_TIMEOUT) -> None:
        """Until `workers` children are up: connected, schema checked, their title `idle`."""
        deadline = time.monotonic() + timeout
        while len(self._idle_children()) < workers:
            self.check_alive()
            if time.monotonic() > deadline:
                self.fail(f"its {workers} workers were not idle within {timeout:g}s")
            time.sleep(POLL)

    def _idle_children(self) -> List[psutil.Process]:
        idle = []
        for child in self.children():
            try:
                if " idle" in " ".join(child.cmdline()):
                    idle.append(child)
            except psutil.Error:
                pass
        return idle

    def memory(self) -> Dict[str, Optional[float]]:
        """{parent_rss, child_rss, child_uss} in MiB now; the children's figures are
        the largest of them. USS: pages only that child has (not shared copy-on-write)."""
        sample: Dict[str, Optional[float]] = {
            "parent_rss": psutil.Process(self.pid).memory_info().rss / MIB}
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

    def cpu_seconds(self) -> Dict[str, float]:
        """{"parent", "children"}: CPU seconds (user + system) used so far; the
        children's are the live ones' and those of the children it reaped (a child
        forked per job lives for a fraction of a run)."""
        return {"parent": cpu_seconds([self.pid]),
                "children": cpu_seconds(child.pid for child in self.children())
                + self._reaped_children_cpu()}

    def _reaped_children_cpu(self) -> float:
        try:
            times = psutil.Process(self.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return times.children_user + times.children_system

    # -- its life -----------------------------------------------------------------

    def check_alive(self) -> None:
        returncode = self.started().poll()
        if returncode is not None:
            self.fail(f"it exited with status {returncode}")

    def fail(self, what: str) -> None:
        raise BenchError(f"{self.label} failed: {what}; its log: {self.log_tail()}")

    def log_tail(self, limit: int = 600) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - limit))
                return handle.read().decode("utf-8", "replace").strip() or "(empty)"
        except OSError:
            return "(none)"

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (a graceful drain), wait; past the deadline SIGKILL its whole session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL what is left of its session (parent, children, stopped ones too), and
        reap the parent."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=KILL_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass


def bench_supervisor(workers: int, queue: str, env: Mapping[str, str],
                     log_path: Path, app: str = "prefork.bench.jobs",
                     extra_args: Sequence[str] = ()) -> SupervisorProcess:
    """The supervisor the bench measures: `workers` children on the scratch queue
    (or queues, comma-separated), running the bench's handlers (`app`), logging
    warnings only; `extra_args`: more flags of `prefork-queue run`."""
    return SupervisorProcess(["--app", app, "--queues", queue,
                              "--workers", str(workers), "--log-level", "warning",
                              "--log-format", "json", *extra_args], env, log_path,
                             label=f"the supervisor ({workers} workers)")


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds (user + system, every thread) the processes used so far, to the
    nanosecond where the process CPU clock can be read (Linux): /proc's figures are
    in ticks of 10 ms, more than a short run of no-op jobs uses in all."""
    total = 0.0
    for pid in pids:
        try:
            total += _process_cpu_clock(pid)
        except OSError:   # gone, or no such clock here: /proc's coarser figure
            total += _ticked_cpu_seconds(pid)
    return total


def _process_cpu_clock(pid: int) -> float:
    """POSIX clock_getcpuclockid(), which Python's time module does not offer."""
    clock = ctypes.c_int()
    getcpuclockid = getattr(ctypes.CDLL(None), "clock_getcpuclockid", None)
    if getcpuclockid is None or getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(f"no CPU clock for process {pid}")
    return time.clock_gettime(clock.value)


def _ticked_cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


class BaselinePool:
    """N forked processes running the textbook loop (or another `loop`, e.g. the
    ceiling's) on the scratch queue. Gated, they connect and then wait for
    release() before their loops begin."""

    def __init__(self, config: Config, queue: str, workers: int, loop: Loop = textbook_loop,
                 label: str = "baseline", gated: bool = False) -> None:
        self.config, self.queue, self.workers = config, queue, workers
        self.loop, self.label, self.gated = loop, label, gated
        self.pids: List[int] = []
        self.ready_fd: Optional[int] = None
        self.gate_fd: Optional[int] = None   # gated: a pipe's write end; closed, they go

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        self.ready_fd = read_fd
        gate_read: Optional[int] = None
        if self.gated:
            gate_read, self.gate_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        for _ in range(self.workers):
            pid = os.fork()
            if pid == 0:
                for fd in (read_fd, self.gate_fd):   # the gate opens only at its last close
                    if fd is not None:
                        os.close(fd)
                _baseline_child(self.loop, self.label, self.config, self.queue,
                                write_fd, gate_read)   # never returns
            self.pids.append(pid)
        os.close(write_fd)
        if gate_read is not None:
            os.close(gate_read)

    def release(self) -> None:
        """A gated pool's processes begin their loops, all at once; else nothing."""
        if self.gate_fd is not None:
            os.close(self.gate_fd)
            self.gate_fd = None

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until every process has its connection open (one byte each on the pipe)."""
        if self.ready_fd is None:
            raise RuntimeError("the baseline was not started")
        deadline, ready = time.monotonic() + timeout, 0
        while ready < self.workers:
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(f"the {self.label}'s {self.workers} processes did not connect "
                                 f"within {timeout:g}s")
            readable, _, _ = select.select([self.ready_fd], [], [], POLL)
            if readable:
                ready += len(os.read(self.ready_fd, self.workers))

    def cpu_seconds(self) -> Dict[str, float]:
        """{"parent": 0 (the bench itself), "children"}: CPU seconds used so far."""
        return {"parent": 0.0, "children": cpu_seconds(self.pids)}

    def memory(self) -> Dict[str, Optional[float]]:
        return {}

    def check_alive(self) -> None:
        for pid in self.pids:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.pids.remove(pid)
                raise BenchError(f"a {self.label} process died ({_describe(status)})")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (each finishes its job), wait; past the deadline SIGKILL."""
        self.release()   # a process at the gate takes no signal: it reads the gate again
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


def ceiling_pool(config: Config, queue: str, workers: int) -> BaselinePool:
    """The ceiling in `workers` processes: the bare batched SQL loop, batches of the
    supervisor's claim_batch. Gated (measure_pool lets it go once the batch is
    committed): its polls, every 10 ms each, walk the rows of an enqueue not yet
    committed one by one (SKIP LOCKED skips them), and those of 64 processes held a
    20,000-job enqueue past the read timeout."""
    return BaselinePool(config, queue, workers, partial(ceiling_loop, batch=config.claim_batch),
                        label="ceiling", gated=True)


def _baseline_child(loop: Loop, label: str, config: Config, queue: str, ready_fd: int,
                    gate_fd: Optional[int]) -> None:
    """A forked baseline process: `loop` until SIGTERM; never returns."""
    code = 1
    try:
        stopping: List[int] = []
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the bench's to handle
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
        die_with_parent()
        loop(config, queue, should_stop=lambda: bool(stopping),
             on_ready=lambda: _ready(ready_fd, gate_fd))
        code = 0
    except BaseException as exc:   # never fall back into the bench's code
        os.write(2, f"{label} process: {type(exc).__name__}\n".encode())
    finally:
        os._exit(code)


def _ready(ready_fd: int, gate_fd: Optional[int]) -> None:
    """Tell the bench this process is connected; gated, wait for the gate to open
    (nothing is written to it: its end of file)."""
    os.write(ready_fd, b"r")
    if gate_fd is not None:
        while os.read(gate_fd, 1):
            pass
        os.close(gate_fd)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.WEXITSTATUS(status)}"
