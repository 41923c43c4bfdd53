"""Running a command job's program: start it in a process group of its own, relay its
output to the log line by line, stop the whole group at a timeout, and describe how
it ended.

Nothing of the group outlives the program: once the program has exited (any
way), whatever it left in its group is killed; and should the worker itself die
(a hard timeout SIGKILLs it), the group's guard kills the group. The guard is a
fork of the worker that leads the group and only waits, every signal blocked,
for its parent-death signal. (The program joins the guard's group, so it stays in
the worker's session: a new session could not be joined.) Killing the group after the program's exit is a
SIGKILL at once, no grace: the job's outcome is already decided, what is left
is work nobody supervises, and a grace would hold the worker up to KILL_GRACE
after every such job (it is also what the leftovers get when the worker dies).
A grandchild that leaves the group on purpose (setsid, a daemon) is not
followed: the worker is no subreaper, as it also runs Python handlers whose own
subprocesses' exit statuses a subreaper's reaping would steal.

What to run (argv, cwd, env) comes from worker/commands.py, which parses the
[command:TYPE] sections and fills the placeholders; nothing here reads config.
"""
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, NoReturn

from ..errors import CommandFailed
from ..events import Event
from ..jobs import Job
from ..logs import event
from ..process_signals import PARENT_ONLY_SIGNALS, die_with_parent, preexec_die_with_parent
from ..titles import set_title
from .output_lines import OutputLog

TEMPFAIL = 75                 # EX_TEMPFAIL from sysexits.h
KILL_GRACE = 5.0              # seconds between SIGTERM and SIGKILL at a timeout
DRAIN_AFTER_EXIT = 1.0        # seconds to read output a process that left the group still writes
READ_SIZE = 65536
# The guard's parent-death signal. Any would do: the guard acts only once its parent
# is gone, and it keeps every signal blocked (a timeout's SIGTERM is for the program).
GUARD_SIGNAL = signal.SIGUSR2
ALL_SIGNALS = signal.valid_signals()
# The supervisor's settings (the DB password!) stay ours; the job's are set per job.
OWN_ENV_PREFIXES = ("PREFORK_QUEUE_", "PREFORK_JOB_")


def describe_status(returncode: int) -> str:
    """How the program ended, as stored in last_error: "command exited 3", "command
    killed by SIGKILL"."""
    if returncode < 0:
        try:
            return f"command killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"command killed by signal {-returncode}"
    if returncode == TEMPFAIL:
        return f"command exited {TEMPFAIL} (temporary failure)"
    return f"command exited {returncode}"


def command_environment(extra: Iterable[tuple[str, str]], job: Job) -> dict[str, str]:
    """The supervisor's environment without prefork-queue's own variables, plus the
    section's env (`extra`) and what the program may want to know about its job."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(OWN_ENV_PREFIXES)}
    env.update(extra)
    env.update(PREFORK_JOB_ID=str(job.id), PREFORK_JOB_TYPE=job.type,
               PREFORK_JOB_QUEUE=job.queue, PREFORK_JOB_ATTEMPT=str(job.attempt))
    if job.idempotency_key:
        env["PREFORK_JOB_KEY"] = job.idempotency_key
    return env


def execute(argv: list[str], job: Job, cwd: str | None,
            extra_env: Iterable[tuple[str, str]]) -> int:
    """Run the program to its end, relaying its output; returns its returncode.

    A JobTimeout (soft timeout), QuickStop or JobCancelled (a cancel) raised while
    it runs stops the program's whole process group (SIGTERM, SIGKILL after
    KILL_GRACE) and propagates. However the program ends, nothing of its group survives it.
    """
    started = time.monotonic()
    with guarded_group(job) as pgid:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd,
                                    env=command_environment(extra_env, job), process_group=pgid,
                                    preexec_fn=preexec_die_with_parent(
                                        signal.SIGKILL, then=_restore_ignored_signals))
        except OSError as exc:
            raise CommandFailed(f"command could not start: {exc.strerror}") from None
        event(Event.COMMAND_STARTED, job_id=job.id, type=job.type, program=argv[0],
              command_pid=proc.pid)
        stdout, stderr = _pipes(proc)
        try:
            relay_output(proc, OutputLog({"job_id": job.id, "type": job.type}, command=True),
                         on_exit=lambda: _signal_group(pgid, signal.SIGKILL))
            status = proc.wait()
        finally:
            if proc.returncode is None:
                _stop(proc, pgid, job)
            stdout.close()
            stderr.close()
    event(Event.COMMAND_EXITED, job_id=job.id, type=job.type, status=describe_status(status),
          elapsed_ms=round((time.monotonic() - started) * 1000, 1))
    return status


@contextmanager
def guarded_group(job: Job) -> Iterator[int]:
    """A new process group led by a guard (see the module's docstring); yields its id.
    On leaving, the whole group is killed and the guard reaped. The guard's pid is
    also the group's id, kept from reuse until we reap it, so the final kill cannot
    reach a stranger.

    Every signal is held off from the fork until the pid is kept here: a soft timeout,
    a quick stop or a cancel arriving meanwhile is raised after, and still ends the guard."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, ALL_SIGNALS)
    guard_pid = 0
    try:
        guard_pid = _fork_guard(job)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        yield guard_pid
    finally:
        if guard_pid:
            _signal_group(guard_pid, signal.SIGKILL)
            _reap(guard_pid)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _fork_guard(job: Job) -> int:
    worker_pid = os.getpid()
    try:
        guard_pid = os.fork()
    except OSError as exc:
        raise CommandFailed(f"command could not start: {exc.strerror}") from None
    if guard_pid == 0:
        _guard(worker_pid, job)
    try:
        os.setpgid(guard_pid, guard_pid)   # the guard does it too: whichever comes first
    except OSError:
        pass   # the guard is gone already: the program cannot join, its start fails
    return guard_pid


def _guard(worker_pid: int, job: Job) -> NoReturn:
    """The guard's whole life, in the forked child: lead the group, wait for the
    worker to die, then kill the group (itself included). It never returns into the
    worker's code. A worker gone before the guard asked for its signal is seen by
    the parent pid, checked after the request."""
    try:
        os.setpgid(0, 0)
        os.closerange(0, os.sysconf("SC_OPEN_MAX"))   # not the database, not the supervisor's pipe
        set_title(f"command guard job {job.id} {job.type}")
        die_with_parent(GUARD_SIGNAL)
        while os.getppid() == worker_pid:
            signal.sigwait({GUARD_SIGNAL})
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _pipes(proc: "subprocess.Popen[bytes]") -> tuple[IO[bytes], IO[bytes]]:
    """The program's stdout and stderr: pipes, as execute() asks for both."""
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the program was started without output pipes")
    return proc.stdout, proc.stderr


def _restore_ignored_signals() -> None:
    """The signals a worker child ignores (the parent acts on them) would stay ignored
    across exec: the program gets them back at their default."""
    for signum in PARENT_ONLY_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _stop(proc: "subprocess.Popen[bytes]", pgid: int, job: Job) -> None:
    """Stop the program and whatever it started: SIGTERM to its process group, SIGKILL
    after KILL_GRACE (or at once if we are interrupted meanwhile)."""
    event(Event.COMMAND_STOPPING, job_id=job.id, type=job.type, command_pid=proc.pid,
          grace_s=KILL_GRACE)
    _signal_group(pgid, signal.SIGTERM)
    try:
        proc.wait(KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    finally:
        _signal_group(pgid, signal.SIGKILL)   # left-over members of the group, too
        proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def relay_output(proc: "subprocess.Popen[bytes]", output: OutputLog,
                 on_exit: Callable[[], None]) -> None:
    """Log stdout and stderr line by line until both end (or shortly after the
    program exited, should a process outside its group keep them open). `on_exit`
    runs once, as soon as the program is seen to have exited."""
    stdout, stderr = _pipes(proc)
    streams = {stdout.fileno(): "stdout", stderr.fileno(): "stderr"}
    exited_at = None
    while streams:
        ready, _, _ = select.select(list(streams), [], [], 0.5)
        for fd in ready:
            chunk = os.read(fd, READ_SIZE)
            if chunk:
                output.feed(streams[fd], chunk)
            else:
                output.finish(streams.pop(fd))
        if streams and proc.poll() is not None:
            if exited_at is None:
                exited_at = time.monotonic()
                on_exit()
            if time.monotonic() - exited_at > DRAIN_AFTER_EXIT:
                break
    for stream in streams.values():
        output.finish(stream)
    output.report_dropped()
