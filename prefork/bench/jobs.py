"""The handlers `prefork-queue bench` runs in the real supervisor (--app prefork.bench.jobs).

- `bench.noop` does nothing: what is measured is the queue, not the work.
- `bench.sleep` sleeps the payload's "seconds": the slow-jobs scenario of --scale.
- `bench.effect` writes one row inside job.transaction() (MySQL: the table the
  effects scenario of --scale creates).
- `bench.pickup` measures pickup latency: its payload carries the wall-clock time
  (time.time()) at which the bench enqueued it; the handler appends the
  milliseconds from then to now, one number a line, to the file named by
  PREFORK_BENCH_PICKUP_FILE. Bench and workers must share a host (one clock).

The limit scenarios' handlers (bench.keyed, bench.rated) are in
prefork/bench/limited_jobs.py, an app of their own: the supervisor of the
plain runs declares no limit, as before limits existed; the workflow scenarios'
(bench.mark) in prefork/bench/workflow_jobs.py. Their names are here, for the
bench, which never imports those apps.
"""
import os
import time

import prefork
from prefork.store.mysql.bench import BENCH_EFFECT_INSERT

NOOP = "bench.noop"
PICKUP = "bench.pickup"
SLEEP = "bench.sleep"
EFFECT = "bench.effect"
PICKUP_FILE_ENV = "PREFORK_BENCH_PICKUP_FILE"

LIMITS_APP = "prefork.bench.limited_jobs"
KEYED = "bench.keyed"       # at most KEY_LIMIT running per concurrency key
KEY_LIMIT = 1
RATED = "bench.rated"       # at most the rate in RATE_ENV starts per concurrency key
RATE_ENV = "PREFORK_BENCH_RATE"
DEFAULT_RATE = "200/s"
STARTS_FILE_ENV = "PREFORK_BENCH_STARTS_FILE"

WORKFLOWS_APP = "prefork.bench.workflow_jobs"
MARK = "bench.mark"         # writes its id and its start time to the file in MARKS_FILE_ENV
MARKS_FILE_ENV = "PREFORK_BENCH_MARKS_FILE"


@prefork.handler(NOOP)
def noop(job):
    pass


@prefork.handler(SLEEP)
def sleep(job):
    time.sleep(float(job.payload["seconds"]))


@prefork.handler(EFFECT)
def effect(job):
    with job.transaction() as cursor:
        cursor.execute(BENCH_EFFECT_INSERT, (job.id,))


@prefork.handler(PICKUP)
def pickup(job):
    latency_ms = (time.time() - float(job.payload["enqueued_at"])) * 1000.0
    path = os.environ.get(PICKUP_FILE_ENV)
    if not path:
        raise prefork.PermanentError()
    append_line(path, f"{latency_ms:.3f}\n")


def append_line(path, line):
    """One write with O_APPEND: lines from several children never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("ascii"))
    finally:
        os.close(fd)
