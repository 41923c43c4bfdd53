"""Handlers for supervisor tests: slow jobs, crashing jobs, leaking jobs."""
import os
import signal
import time

from ledger_app import ledger as write_ledger

import prefork

_hoard = []
RELEASE_TIMEOUT = 60.0


def wait_for_file(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


@prefork.handler("tally")
def tally(job):
    """Sleeps payload['seconds'] (or, given payload['until'], until that file exists:
    60 s at most), then appends its id to the file payload['log']. No transaction of
    its own: the worker writes its completion (with its batch's)."""
    if "until" in job.payload:
        wait_for_file(job.payload["until"], RELEASE_TIMEOUT)
    time.sleep(float(job.payload.get("seconds", 0)))
    with open(job.payload["log"], "a") as log:
        log.write(f"{job.id}\n")


@prefork.handler("slow_ledger")
def slow_ledger(job):
    """Sleeps payload['seconds'], then writes its ledger row with the completion."""
    time.sleep(float(job.payload.get("seconds", 1)))
    write_ledger(job)


@prefork.handler("segv")
def segv(job):
    os.kill(os.getpid(), signal.SIGSEGV)


@prefork.handler("hog")
def hog(job):
    """Keeps 30 MiB more per job, as a leaky handler would."""
    _hoard.append(bytearray(30 * 1024 * 1024))
    write_ledger(job)


@prefork.handler("stuck", hard_timeout=1)
def stuck(job):
    time.sleep(60)


@prefork.handler("dawdle", soft_timeout=0.5)
def dawdle(job):
    time.sleep(60)
