"""Handlers for tests/dashboard/test_dashboard_data.py: one job type per outcome the per-minute
rollup counts (done, failed then retried, dead at once, a worker's death)."""
import os
import signal

import prefork


@prefork.handler("dash.ok")
def ok(job):
    """Done at the first attempt."""


@prefork.handler("dash.flaky", max_attempts=3, backoff=lambda attempt: 0)
def flaky(job):
    """Fails until its attempt payload['succeed_at'] (never, when absent: dead after 3)."""
    if job.attempt < job.payload.get("succeed_at", 4):
        raise ConnectionError("upstream down")


@prefork.handler("dash.poison")
def poison(job):
    """Dead at its first attempt."""
    raise prefork.PermanentError("malformed order")


@prefork.handler("dash.crash")
def crash(job):
    """Kills its worker (with --max-crashes 1 the job is dead at once)."""
    os.kill(os.getpid(), signal.SIGKILL)
