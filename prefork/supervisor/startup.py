"""Signals that reach the supervisor while it starts up.

`prefork-queue run` calls catch_signals_early() before it reads its config or
imports the application: from then on, no signal the supervisor handles takes
its default action (death for most, a stop for SIGTTIN and SIGTTOU).

As a stop signal (SIGTERM, SIGINT, SIGQUIT) sees it, start-up has two phases:

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

Any other signal is only recorded, in both phases; the supervisor's loop takes
over the record (take_pending()) and applies each signal once it runs.
"""
import signal
from types import FrameType, TracebackType

from ..logs import event
from ..process_signals import STOP_SIGNALS, SUPERVISOR_SIGNALS

_pending: list[int] = []
_stops_raise = False


class StartupStopped(SystemExit):
    """A stop signal ended the start-up. A SystemExit with status 0: wherever it is
    raised it ends the process cleanly (no traceback), and an application's
    `except Exception:` around its own imports does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(0)
        self.signum = signum


def catch_signals_early() -> None:
    """Record every signal the supervisor handles, from now on, instead of dying of it;
    a stop signal ends the start-up (StartupStopped) until defer_stops()."""
    global _stops_raise
    _stops_raise = True
    # Blocked while the handlers change, so that none comes to the interpreter's own
    # (SIGINT's raises KeyboardInterrupt) once ours are partly set.
    signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISOR_SIGNALS)
    for signum in SUPERVISOR_SIGNALS:
        signal.signal(signum, _record)
    # Unblocked even if the launcher held them blocked across exec, as it may so
    # that none sent before we could catch it is lost (the tests do): delivered
    # now. And a mask inherited by accident must not leave the supervisor deaf.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SUPERVISOR_SIGNALS)


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
        event("supervisor_stopped", done=0, dead=0, during="start-up",
              signal=signal.Signals(error.signum).name)
        return True
