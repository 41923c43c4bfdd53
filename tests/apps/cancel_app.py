"""Handlers for cancellation tests: each writes marker files the test reads from outside
(payload["started"] once running, payload["finally"] from its finally block)."""
import time
from pathlib import Path

import prefork

LONGEST = 120.0   # seconds: no handler here outlives a test that forgot it


def touch(path, text=""):
    Path(path).write_text(text)


@prefork.handler("cancel.wait")
def wait(job):
    """Runs until interrupted. With payload["transaction"], inside job.transaction(),
    after writing its ledger row there (a cancel must roll it back)."""
    try:
        if job.payload.get("transaction"):
            with job.transaction() as cursor:
                cursor.execute("INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)",
                               (f"cancel-{job.id}", job.id))
                touch(job.payload["started"])
                time.sleep(LONGEST)
        else:
            touch(job.payload["started"])
            time.sleep(LONGEST)
    finally:
        touch(job.payload["finally"], "finally ran")


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
    deadline = time.monotonic() + LONGEST
    while not Path(job.payload["until"]).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
