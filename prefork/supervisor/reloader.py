"""`run --reload true`, for development: a watcher process runs the supervisor as
its child and starts a new one when a file of the application changes.

The supervisor imports the application once and forks its workers from it, so
they run the code of that import: new code needs a new process, not a fork.
So with reload on, `run` is this small watcher (it never imports the
application) and the supervisor is its child, started again on a change: the
old one gets SIGTERM and drains (running jobs finish, claimed ones go back),
then a new one imports the files as they are now.

What is watched is what the supervisor imported: once its import of the --app
modules ends, well or not, it sends the watcher over an inherited pipe the
.py files of its modules under the working directory and the --app packages
(a vendored site-packages there left out), plus, after a failed import, the
files of the error (a SyntaxError's file, the frames of the traceback). The
config file is watched too. The watcher polls their mtimes, as gunicorn's
reloader does, without a dependency; hupper works the same way (a monitor
process, a worker that reports its modules).

A supervisor that exits with an error (the application does not import, the
database is away) is logged once, and started again at the next change (or a
SIGHUP), never in a loop. The watcher forwards the supervisor's signals; a stop
signal ends both, with the supervisor's exit status.
"""
import enum
import json
import os
import select
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Optional

from ..errors import UserError
from ..logs import event
from ..process_signals import (STOP_SIGNALS, SUPERVISOR_SIGNALS, block_stop_signals,
                               preexec_die_with_parent)
from . import startup

# The supervisor finds the pipe's write end here; it takes the variable out of
# its environment at once, so that its workers and their programs never see it.
REPORT_FD_ENV = "PREFORK_QUEUE_RELOADER_FD"
POLL_INTERVAL = 0.5       # seconds between looks at the files' mtimes
VENDORED = ("site-packages", "dist-packages")
FileState = Optional[tuple[int, int]]   # (mtime in ns, size); None: no such file


class Phase(enum.Enum):
    RUNNING = "running"          # a supervisor is up (or starting)
    RESTARTING = "restarting"    # it drains after a change; a new one follows
    FAILED = "failed"            # it exited with an error; the next change starts one
    STOPPING = "stopping"        # a stop signal was forwarded; its exit ends ours


def refuse_under_systemd(environ: dict[str, str]) -> None:
    """--reload is for development. Under systemd (NOTIFY_SOCKET set) the supervisor
    would be a child of the unit's main process, whose READY=1 systemd drops
    (NotifyAccess=main), and every write to a deployed file would restart it."""
    if environ.get("NOTIFY_SOCKET"):
        raise UserError("--reload is for development and cannot run under systemd "
                        "(NOTIFY_SOCKET is set): restart the unit to load new code")


# -- in the supervisor: which files to watch -------------------------------------

def supervised() -> bool:
    """True in a supervisor that a watcher started."""
    return REPORT_FD_ENV in os.environ


@contextmanager
def reporting_files(apps: Sequence[str]) -> Iterator[None]:
    """Around the import of the application in a supervisor the watcher started:
    when it ends, report the files to watch, also when it failed."""
    fd_text = os.environ.pop(REPORT_FD_ENV, None)
    if fd_text is None:
        yield
        return
    try:
        yield
    except BaseException as exc:
        _send(int(fd_text), application_files(apps, exc))
        raise
    _send(int(fd_text), application_files(apps))


def application_files(apps: Sequence[str], error: Optional[BaseException] = None) -> list[str]:
    """The .py files of the loaded modules under the working directory or an --app
    package, the --app modules' own, and (after a failed import) the error's."""
    roots = [os.getcwd()]
    found = set()
    for name in apps:
        module = sys.modules.get(name.split(".")[0])
        roots += list(getattr(module, "__path__", []))
        found.add(getattr(sys.modules.get(name), "__file__", None))
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and _inside(os.path.abspath(path), roots):
            found.add(path)
    if error is not None:
        found |= {path for path in _files_of(error) if _inside(path, roots)}
        found.add(_syntax_error_file(error))
    return sorted({os.path.abspath(path) for path in found if path and path.endswith(".py")})


def _inside(path: str, roots: Sequence[str]) -> bool:
    for root in roots:
        relative = os.path.relpath(path, root)
        if not relative.startswith(os.pardir) and \
                not any(part in VENDORED for part in relative.split(os.sep)):
            return True
    return False


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and its causes (the registry wraps an import error in a UserError)."""
    seen: set[int] = set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _files_of(error: BaseException) -> set[str]:
    """The files of the tracebacks: a module that raised at import time is no longer
    in sys.modules, but its frame is here."""
    return {frame.filename for exc in _chain(error)
            for frame in traceback.extract_tb(exc.__traceback__)}


def _syntax_error_file(error: BaseException) -> Optional[str]:
    return next((exc.filename for exc in _chain(error)
                 if isinstance(exc, SyntaxError) and exc.filename), None)


def _send(fd: int, files: list[str]) -> None:
    """Write the list to the watcher and close our end (before any fork: the workers
    must not hold it open)."""
    data = json.dumps(files).encode()
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass   # the watcher is gone: the parent-death signal ends us next
    finally:
        os.close(fd)


# -- the watcher --------------------------------------------------------------------

def _stat(path: str) -> FileState:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: 128 + N for death by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


class Watcher:
    """The process `run --reload true` becomes: its only child is the supervisor."""

    def __init__(self, run_args: Sequence[str], config_path: Optional[str]) -> None:
        self.command = [sys.executable, "-m", "prefork", "run", *run_args]
        self.watched: dict[str, FileState] = {}
        if config_path:
            self.watched[os.path.abspath(config_path)] = None
        self.phase = Phase.RUNNING
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.report: Optional[int] = None          # the pipe's read end while it is open
        self.report_data = b""
        self.pending: list[int] = []
        self.wake_read = -1

    def run(self) -> int:
        """Watch until a stop; returns the exit status."""
        self._install_signal_handlers()
        event("reloader_started", pid=os.getpid(), interval=POLL_INTERVAL)
        self._start()
        while True:
            for signum in self._take_signals():
                status = self._on_signal(signum)
                if status is not None:
                    return status
            if self.proc is not None and self.proc.poll() is not None:
                status = self._on_exit(self.proc.returncode)
                if status is not None:
                    return status
            if self.phase in (Phase.RUNNING, Phase.FAILED):
                self._restart_on_change()
            self._wait()

    # -- signals: recorded by the handler, acted on by the loop -----------------------

    def _install_signal_handlers(self) -> None:
        self.wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)   # a signal ends the select at once

        def record(signum: int, frame: Optional[FrameType]) -> None:
            self.pending.append(signum)

        for signum in SUPERVISOR_SIGNALS:
            signal.signal(signum, record)
        self.pending[:0] = startup.take_pending()

    def _take_signals(self) -> list[int]:
        taken = []
        while self.pending:   # popped one by one: the handler may append meanwhile
            taken.append(self.pending.pop(0))
        return [signum for signum in taken if signum != signal.SIGCHLD]   # it only woke us

    def _on_signal(self, signum: int) -> Optional[int]:
        """Forward it; a stop ends the watch with the supervisor. The exit status when
        there is no supervisor to wait for."""
        alive = self.proc is not None and self.proc.poll() is None
        if alive:
            assert self.proc is not None
            self.proc.send_signal(signum)
        if signum in STOP_SIGNALS:
            self.phase = Phase.STOPPING
            return None if alive else 0
        if signum == signal.SIGHUP and self.phase is Phase.FAILED:
            self._start()   # try again without waiting for a change
        return None

    # -- the supervisor ----------------------------------------------------------------

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        env = dict(os.environ, **{REPORT_FD_ENV: str(write_end)})
        # Compile from the source each time: a .pyc written at the last start is
        # trusted when the file changed within the same second with the same size.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        try:
            self.proc = subprocess.Popen(
                self.command, env=env, pass_fds=(write_end,), stdin=subprocess.DEVNULL,
                # Its own session: a terminal's Ctrl-C reaches the watcher only, which
                # forwards it once. It dies with the watcher, its stop signals held
                # until it catches them.
                start_new_session=True,
                preexec_fn=preexec_die_with_parent(signal.SIGTERM, then=block_stop_signals))
        finally:
            os.close(write_end)
        self._close_report()
        self.report, self.report_data = read_end, b""
        self.watched = {path: _stat(path) for path in self.watched}
        self.phase = Phase.RUNNING

    def _on_exit(self, returncode: int) -> Optional[int]:
        """The supervisor ended; our exit status when that ends the watch too."""
        self.proc = None
        if self.phase is Phase.STOPPING:
            return exit_status(returncode)
        if self.phase is Phase.RESTARTING:
            self._start()
        elif returncode == 0:
            return 0   # stopped by someone else: we stop with it
        else:
            self.phase = Phase.FAILED
            event("reload_supervisor_failed", status=exit_status(returncode),
                  note="fix the application: the next change starts it again")
        return None

    def _restart_on_change(self) -> None:
        changed = next((path for path, seen in self.watched.items() if _stat(path) != seen),
                       None)
        if changed is None:
            return
        event("reload_changed", file=changed, phase=self.phase.value)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # it drains; its exit starts the next
            self.phase = Phase.RESTARTING
        else:
            self._start()

    # -- waiting -------------------------------------------------------------------------

    def _wait(self) -> None:
        fds = [self.wake_read] + ([self.report] if self.report is not None else [])
        ready, _, _ = select.select(fds, [], [], POLL_INTERVAL)
        if self.wake_read in ready:
            os.read(self.wake_read, 512)
        if self.report is not None and self.report in ready:
            self._read_report(self.report)

    def _read_report(self, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if chunk:
            self.report_data += chunk
            return
        self._close_report()   # the end of it: the supervisor closed its end, or exited
        try:
            files = json.loads(self.report_data) if self.report_data else []
        except ValueError:
            files = []
        for path in files:
            self.watched.setdefault(path, _stat(path))
        if self.report_data:   # none when the supervisor ended before its import did
            event("reload_watching", files=len(self.watched))

    def _close_report(self) -> None:
        if self.report is not None:
            os.close(self.report)
            self.report = None
