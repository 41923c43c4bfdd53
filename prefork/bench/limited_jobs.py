"""The handlers of the limit scenarios of `prefork-queue bench --limits`
(--app prefork.bench.limited_jobs): the bench's own (prefork.bench.jobs), and two
limited no-op types.

- `bench.keyed`: at most KEY_LIMIT (1) running at once per concurrency key.
- `bench.rated`: at most the rate in PREFORK_BENCH_RATE (e.g. 200/s) starts per
  concurrency key; each start appends the wall-clock time (time.time()) to the
  file named by PREFORK_BENCH_STARTS_FILE, for the achieved rate.
"""
import os
import time

import prefork

from . import jobs
from .jobs import DEFAULT_RATE, KEY_LIMIT, KEYED, RATE_ENV, RATED, STARTS_FILE_ENV

__all__ = ["jobs", "keyed", "rated"]   # jobs: importing it registers the plain handlers


@prefork.handler(KEYED, concurrency=KEY_LIMIT)
def keyed(job: prefork.Job) -> None:
    pass


@prefork.handler(RATED, rate=os.environ.get(RATE_ENV, DEFAULT_RATE))
def rated(job: prefork.Job) -> None:
    path = os.environ.get(STARTS_FILE_ENV)
    if not path:
        raise prefork.PermanentError()
    jobs.append_line(path, f"{time.time():.6f}\n")
