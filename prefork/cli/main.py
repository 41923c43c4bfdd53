"""The command line's entry point (`prefork-queue`, `python -m prefork`).

A supervisor takes its signals from its first instruction: this module imports nothing
but supervisor/startup.py, holds the signals, and only then loads the commands, the
store and the drivers (dispatch.py, which parses, runs one command and turns what went
wrong into an exit code).
"""
from typing import Optional, Sequence

from ..supervisor import startup


def main(argv: Optional[Sequence[str]] = None) -> int:
    startup.hold_signals()
    from . import dispatch   # the heavy imports: with the signals held
    return dispatch.main(argv)
