"""Signals that reach the supervisor while it starts up.

The command line holds them first of all (hold_signals()), before it imports the
commands, the store and the drivers: from then on, no signal the supervisor handles
takes its default action (death for most, a stop for SIGTTIN and SIGTTOU), and only
the interpreter's own start remains before it (a launcher that blocks the stop signals
across exec covers that too: see process_signals.block_stop_signals). Once the command
is known, `run` keeps them (stop_on_signals()); any other command gets back the
handlers it found, and each signal held meanwhile is raised again (release_signals()).

As a stop signal (SIGTERM, SIGINT, SIGQUIT) sees it, the start-up of `run` has three
phases:

- Held, until the command is known: a stop is recorded, and ends the start-up as
  soon as the command is known to be `run`.
- Interruptible, until the supervisor registers: reading the config, importing
  the application, connecting to the database. The handler raises
  StartupStopped at once, so a slow import, or a connect to a database that
  does not answer, is abandoned instead of waited for. Nothing there needs
  undoing: no child exists yet, the one write (the schema of a new SQLite file)
  is one transaction, and the process's exit closes whatever was opened.
- Deferred, from the registry insert on (defer_stops()): a stop is only
  recorded. Cut short, the insert could leave a row that we never learn of,
  'running' until another supervisor prunes it. Recorded, the stop reaches the
  supervisor's loop, which drains (no child yet) and marks the row stopped, as
  every clean exit does.

Any other signal is only recorded, in every phase; the supervisor's loop takes
over the record (take_pending()) and applies each signal once it runs.

This module imports no more than the signals' declaration: the command line loads it
before anything else.
"""
import signal
from types import FrameType, TracebackType
from typing import Any

from ..process_signals import STOP_SIGNALS, SUPERVISOR_SIGNALS

_pending: list[int] = []
_stops_raise = False
# What hold_signals() found, for release_signals() to put back.
_found_handlers: dict[int, Any] = {}
_found_mask: set[int | signal.Signals] = set()


class StartupStopped(SystemExit):
    """A stop signal ended the start-up. A SystemExit with status 0: wherever it is
    raised it ends the process cleanly (no traceback), and an application's
    `except Exception:` around its own imports does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(0)
        self.signum = signum


def hold_signals() -> None:
    """Record every signal the supervisor handles, from now on, instead of dying of it
    (the first thing the command line does, before it knows its command)."""
    global _found_mask
    # Blocked while the handlers change, so that none comes to the interpreter's own
    # (SIGINT's raises KeyboardInterrupt) once ours are partly set.
    _found_mask = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISOR_SIGNALS)
    for signum in SUPERVISOR_SIGNALS:
        _found_handlers[signum] = signal.signal(signum, _record)
    # Unblocked even if the launcher held them blocked across exec, as it may so
    # that none sent before we could catch it is lost (the tests do): delivered
    # now. And a mask inherited by accident must not leave the supervisor deaf.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SUPERVISOR_SIGNALS)


def stop_on_signals() -> None:
    """The command is `run`: a stop signal ends the start-up (StartupStopped) until
    defer_stops(), and one held already ends it now."""
    global _stops_raise
    _stops_raise = True
    _raise_a_recorded_stop()


def release_signals() -> None:
    """The command is not `run`: the handlers and the signal mask it started with back,
    then each signal held meanwhile raised again, as if it came now."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISOR_SIGNALS)
    for signum, handler in _found_handlers.items():
        signal.signal(signum, handler)
    held = take_pending()
    signal.pthread_sigmask(signal.SIG_SETMASK, _found_mask)
    for signum in held:
        signal.raise_signal(signum)


def _record(signum: int, frame: FrameType | None) -> None:
    _pending.append(signum)
    if _stops_raise and signum in STOP_SIGNALS:
        raise StartupStopped(signum)


def defer_stops() -> None:
    """End the interruptible phase: the registry insert comes next. A stop recorded
    but swallowed before (a bare `except:` around an application's imports) ends
    the start-up here, before anything is written."""
    global _stops_raise
    _stops_raise = False
    _raise_a_recorded_stop()


def _raise_a_recorded_stop() -> None:
    stops = [signum for signum in _pending if signum in STOP_SIGNALS]
    if stops:
        raise StartupStopped(stops[0])


def take_pending() -> list[int]:
    """The signals recorded so far, oldest first, for the supervisor's loop (called
    once its own handlers are set: nothing is recorded here after that)."""
    taken = list(_pending)
    _pending.clear()
    return taken


class CleanStop:
    """`with CleanStop():` around the start-up: a stop signal that ends it is logged,
    and the block ends quietly (the run command then exits 0)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        global _stops_raise
        if not isinstance(error, StartupStopped):
            return False
        _stops_raise = False   # a second stop must not cut this log line short
        from ..logs import event   # here: loading the logs must come after hold_signals()
        event("supervisor_stopped", done=0, dead=0, during="start-up",
              signal=signal.Signals(error.signum).name)
        return True
