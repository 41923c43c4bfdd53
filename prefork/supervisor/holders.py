"""Whether the child that claimed a job of a silent supervisor still runs on this
host: pruning that supervisor must not hand its job out again while it runs."""
import os
import time
from typing import Optional

import psutil

from ..store.contract import HeldJob
from .decisions import holder_may_run


def holder_still_runs(held: HeldJob) -> bool:
    """Does the child that claimed this job of a silent supervisor still run here?
    Then its job must not be handed out again while it runs (decisions.holder_may_run)."""
    return holder_may_run(held.worker, held.seconds_since_write, os.uname().nodename,
                          process_started_at, time.time())


def process_started_at(pid: int) -> Optional[float]:
    """When the live process `pid` started (Unix time); None when there is none. One
    we may not inspect counts as started long ago: it may be the holder."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:
        return 0.0
