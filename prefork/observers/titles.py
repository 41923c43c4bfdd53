"""Process titles an operator reads in `ps` and `top -c`. Never a DSN or a secret."""
from typing import Any, Optional, Sequence

import setproctitle


def set_title(text: str) -> None:
    setproctitle.setproctitle(f"prefork-queue {text}")


def master_title(queues: Sequence[str], alive: int, target: int, done: int, dead: int,
                 note: str = "") -> str:
    text = f"master [{','.join(queues)}] workers {alive}/{target} done {done} dead {dead}"
    return f"{text} {note}".rstrip()


def worker_title(slot: int, queues: Sequence[str], state: str, job: Optional[Any] = None,
                 busy_seconds: float = 0.0) -> str:
    prefix = f"worker {slot} [{','.join(queues)}]"
    if job is not None:
        return f"{prefix} busy job {job.id} {job.type} {int(busy_seconds)}s"
    return f"{prefix} {state}"
