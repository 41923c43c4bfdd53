"""The handlers of the workflow scenarios of `prefork-queue bench --workflows`
(--app prefork.bench.workflow_jobs): the bench's own (prefork.bench.jobs), whose
no-op jobs are a group's members and the plain jobs it is compared with, and

- `bench.mark`: a chain's step or a group's callback. As it starts it appends its
  job id and the wall-clock time (time.time()) to the file named by
  PREFORK_BENCH_MARKS_FILE: how long after the commit that released it it started.
"""
import os
import time

import prefork

from . import jobs
from .jobs import MARK, MARKS_FILE_ENV

__all__ = ["jobs", "mark"]   # jobs: importing it registers the plain handlers


@prefork.handler(MARK)
def mark(job: prefork.Job) -> None:
    started = time.time()
    path = os.environ.get(MARKS_FILE_ENV)
    if not path:
        raise prefork.PermanentError()
    jobs.append_line(path, f"{job.id} {started:.6f}\n")
