"""The signals of our processes, declared once: which the supervisor handles, which
its children leave to it, and the parent-death signal.

Every process we start (a supervisor's children, a command job's program,
the bench's supervisor and baseline) asks for a parent-death signal, so that
even a SIGKILL of its parent leaves no orphan behind.
"""
import os
import signal
from typing import Callable, Optional

PR_SET_PDEATHSIG = 1

# What the supervisor handles; each has a handle_<name> method there.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
SUPERVISOR_SIGNALS = STOP_SIGNALS + (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU,
                                     signal.SIGUSR1, signal.SIGCHLD)
# Meant for the supervisor alone: a terminal's Ctrl-C and a `kill -HUP` of the
# process group reach every process, and a child (and the programs it runs)
# must leave them to the parent. A child ignores them; a command job's
# program gets them back at their default.
PARENT_ONLY_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTTIN, signal.SIGTTOU,
                       signal.SIGUSR1)
# Blocked by the parent across fork(), unblocked once the child's handlers are set.
BLOCKED_ACROSS_FORK = frozenset(STOP_SIGNALS + (signal.SIGHUP, signal.SIGCHLD))


def _prctl() -> Optional[Callable[..., int]]:
    """libc's prctl, or None where there is none (not Linux): then nothing is asked."""
    import ctypes   # here: the command line loads this module before anything it can defer
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    except OSError:
        return None


def die_with_parent(signum: int = signal.SIGTERM, parent_pid: Optional[int] = None) -> bool:
    """Ask for `signum` when the parent dies. With parent_pid, False when that parent
    is already gone (it died before the request took effect): the caller should exit.
    Where the call does not exist (not Linux), nothing happens and True is returned."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    return parent_pid is None or os.getppid() == parent_pid


def preexec_die_with_parent(signum: int = signal.SIGKILL,
                            then: Optional[Callable[[], None]] = None) -> Callable[[], None]:
    """A preexec_fn for subprocess: the program dies with us. prctl is looked up now,
    in the parent, so that the forked child does only async-signal-tolerant work."""
    prctl = _prctl()
    parent_pid = os.getpid()

    def prepare() -> None:
        if then is not None:
            then()
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent_pid:   # the parent died before the request took effect
            os._exit(1)
    return prepare


def block_stop_signals() -> None:
    """For a launcher's preexec_fn: the supervisor it starts begins with its stop signals
    blocked, so one sent before the interpreter runs our first line waits instead of
    killing it; the supervisor unblocks them once it holds them (supervisor/startup.py)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
