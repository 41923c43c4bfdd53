"""Process titles an operator reads in `ps` and `top -c`. Never a DSN or a secret."""
from typing import Any, Optional, Sequence

import setproctitle

SINCE_START = "since start"   # what the master's done/dead count (short: `ps` cuts at 80)


def set_title(text: str) -> None:
    setproctitle.setproctitle(f"prefork-queue {text}")


def master_title(queues: Sequence[str], alive: int, target: int, done: int, dead: int,
                 note: str = "") -> str:
    """`done` and `dead` count what this supervisor's workers did since it started: jobs
    completed, and jobs sent to dead (a job that goes dead again after a retry counts
    again). Not the dead jobs in the queue now: `prefork-queue failed` lists those."""
    # The note (draining, restart backoff) before the counters: `ps` cuts long titles,
    # and what the supervisor is doing matters more than its tallies.
    workers = f"master [{','.join(queues)}] workers {alive}/{target}"
    counts = f"done {done} dead {dead} {SINCE_START}"
    return f"{workers} {note} {counts}" if note else f"{workers} {counts}"


def worker_title(slot: int, queues: Sequence[str], state: str, job: Optional[Any] = None,
                 busy_seconds: float = 0.0) -> str:
    prefix = f"worker {slot} [{','.join(queues)}]"
    if job is not None:
        return f"{prefix} busy job {job.id} {job.type} {int(busy_seconds)}s"
    return f"{prefix} {state}"
