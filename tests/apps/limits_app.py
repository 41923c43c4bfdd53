"""Handlers for the limits tests (tests/supervisor/test_limits_supervisor.py, tests/limits_chaos.py).

Each limited handler appends to the execution log payload['log'] a line when it
starts and one when it ends (in a finally: a quick stop's QuickStop passes
through it; a SIGKILL does not): "start|end JOB_ID TYPE KEY PID UNIX_TIME".
One short os.write() on an O_APPEND file per line: lines of concurrent
processes never interleave.

With LIMITS_CLAIM_LOG set, every limited claim a worker makes (the real one,
run as always) also appends "claim PID UNIX_TIME" there, so that a test can
bound how often workers ask while jobs wait on a full limit.
"""
import os
import time

import prefork
from prefork.worker.limited import LimitedClaims

CLAIM_LOG = os.environ.get("LIMITS_CLAIM_LOG")


def append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def wait_for_file(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


def logged_run(job):
    """Log the start, sleep payload['seconds'] (or until the file payload['until']
    exists), log the end."""
    log = job.payload["log"]
    key = job.payload.get("key", "-")
    append(log, f"start {job.id} {job.type} {key} {os.getpid()} {time.time():.6f}")
    try:
        if "until" in job.payload:
            wait_for_file(job.payload["until"])
        time.sleep(float(job.payload.get("seconds", 0)))
    finally:
        append(log, f"end {job.id} {job.type} {key} {os.getpid()} {time.time():.6f}")


@prefork.handler("limited.pair", concurrency=2)
def pair(job):
    logged_run(job)


@prefork.handler("limited.single", concurrency=1)
def single(job):
    logged_run(job)


@prefork.handler("limited.rate", rate="20/s")
def rate(job):
    logged_run(job)


@prefork.handler("plain.note")
def note(job):
    logged_run(job)


if CLAIM_LOG:
    _claim = LimitedClaims._claim

    def _counted_claim(self):
        append(CLAIM_LOG, f"claim {os.getpid()} {time.time():.6f}")
        return _claim(self)

    LimitedClaims._claim = _counted_claim
