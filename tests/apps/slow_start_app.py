"""An application whose import the test holds open, to signal a supervisor while it
imports its application (tests/supervisor/test_startup_signals.py).

With PREFORK_TEST_IMPORT_GATE set, the import creates the file named by
PREFORK_TEST_IMPORTING, then waits until the gate file exists (at most
GATE_WAIT_LIMIT seconds, so a forgotten gate cannot hang a run). With
PREFORK_TEST_SWALLOW_STOP set, it also catches whatever interrupts that wait
(a bare except, as careless application code does), notes it in the file named
by that variable, and finishes its import.
"""
import os
import time
from pathlib import Path

import prefork

GATE_WAIT_LIMIT = 60.0


@prefork.handler("slow_start.noop")
def noop(job):
    pass


def _wait_for_gate(gate):
    Path(os.environ["PREFORK_TEST_IMPORTING"]).touch()
    deadline = time.monotonic() + GATE_WAIT_LIMIT
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _hold_the_import():
    gate = os.environ.get("PREFORK_TEST_IMPORT_GATE")
    if not gate:
        return
    try:
        _wait_for_gate(Path(gate))
    except BaseException as exc:  # the careless application code this app stands for
        swallowed_note = os.environ.get("PREFORK_TEST_SWALLOW_STOP")
        if not swallowed_note:
            raise
        Path(swallowed_note).write_text(type(exc).__name__)


_hold_the_import()
