"""Signals that reach the supervisor while it starts up.

Installed as the very first thing `prefork-queue run` does, before the
configuration is read or the application imported; the supervisor's main
loop takes over what was recorded here.
"""
import signal

from ..process_signals import SUPERVISOR_SIGNALS

pending: list = []


def catch_signals_early() -> None:
    """Record every signal the supervisor handles, from now on, instead of dying of it."""
    for signum in SUPERVISOR_SIGNALS:
        signal.signal(signum, lambda received, frame: pending.append(received))
