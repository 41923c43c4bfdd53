"""Handlers for cancellation tests: each writes marker files the test reads from outside
(payload["started"] once running, payload["finally"] from its finally block)."""
import signal
import time
from pathlib import Path

import prefork
from prefork.worker.cancellation import CANCEL_SIGNAL

LONGEST = 120.0   # seconds: no handler here outlives a test that forgot it


def touch(path, text=""):
    Path(path).write_text(text)


@prefork.handler("cancel.wait")
def wait(job):
    """Runs until interrupted. With payload["go"], the parent's cancel signal is ignored
    (the job's id stays in the control pipe) until that file exists; then, inside
    job.transaction(), right after the handler wrote its ledger row there, the signal
    is raised again for the worker's own handler: the cancel must roll the row back.
    (A cancel cannot be requested while the transaction runs: it holds the job's row.)"""
    try:
        if "go" in job.payload:
            worker_handler = signal.signal(CANCEL_SIGNAL, signal.SIG_IGN)
            touch(job.payload["started"])
            wait_for(job.payload["go"])
            with job.transaction() as cursor:
                cursor.execute("INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)",
                               (f"cancel-{job.id}", job.id))
                touch(job.payload["inside"])
                signal.signal(CANCEL_SIGNAL, worker_handler)
                signal.raise_signal(CANCEL_SIGNAL)
                time.sleep(LONGEST)
        else:
            touch(job.payload["started"])
            time.sleep(LONGEST)
    finally:
        touch(job.payload["finally"], "finally ran")


def wait_for(path):
    deadline = time.monotonic() + LONGEST
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@prefork.handler("cancel.stubborn")
def stubborn(job):
    """Ignores JobCancelled (catches BaseException) and keeps sleeping: only the kill
    after cancel_grace stops it. payload["caught"] records what it swallowed."""
    deadline = time.monotonic() + LONGEST
    touch(job.payload["started"])
    while time.monotonic() < deadline:
        try:
            time.sleep(deadline - time.monotonic())
        except BaseException as exc:   # noqa: B036 - the point of this handler
            touch(job.payload["caught"], type(exc).__name__)


@prefork.handler("cancel.quick")
def quick(job):
    touch(job.payload["finally"], "done")


@prefork.handler("cancel.gate")
def gate(job):
    """Runs until the file payload["until"] exists (LONGEST at most)."""
    touch(job.payload["started"])
    wait_for(job.payload["until"])


@prefork.handler("cancel.timed", soft_timeout=1.5)
def timed(job):
    """Its cleanup outlasts its soft timeout: the cancel must stay a cancel (no
    JobTimeout may replace JobCancelled while the finally block runs)."""
    try:
        touch(job.payload["started"])
        time.sleep(LONGEST)
    finally:
        time.sleep(2.5)
        touch(job.payload["finally"], "finally ran")
