"""A handler for tests/supervisor/test_hung_supervisor.py that will not be stopped: it swallows
every exception (QuickStop too) and sleeps on. Its runs are logged as limits_app's
(start and end lines), and each stop it swallowed as an "ignored" line."""
import os
import time

from limits_app import append

import prefork


@prefork.handler("hung.stubborn", concurrency=1)
def stubborn(job):
    log = job.payload["log"]
    fields = f"{job.id} {job.type} - {os.getpid()}"
    append(log, f"start {fields} {time.time():.6f}")
    deadline = time.monotonic() + float(job.payload["seconds"])
    while (left := deadline - time.monotonic()) > 0:
        try:
            time.sleep(left)
        except BaseException:   # noqa: B036  (the point: a handler that ignores stops)
            append(log, f"ignored {fields} {time.time():.6f}")
    append(log, f"end {fields} {time.time():.6f}")
