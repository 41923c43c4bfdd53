"""`enqueue`'s check, without --app, that something will run a job before it is
written (--force skips it): a live supervisor of the job's queue that handles its
type, by the job types the supervisors publish in the registry
(store/registry_rows.py). With --app, jobs_file.check_job_types checks the
application's handlers instead.

A supervisor that lists no job types (an older release, or a list past the bound)
may handle any. When no live supervisor of a queue is known, nothing can be said
of its types: the job is enqueued, with a warning on stderr.
"""
import difflib
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..config import Config
from ..errors import UserError
from ..store.contract import Store
from ..store.registry_rows import is_stale, job_types
from .parser import PROG

SHOWN_TYPES = 3   # job types a warning names


class Enqueued(NamedTuple):
    """A job to check: its queue and type, and where it was given ("" or "FILE:LINE: ")."""
    queue: str
    job_type: str
    where: str = ""


def check_handled(jobs: Sequence[Enqueued], config: Config, store: Store) -> list[str]:
    """Refuse the first job whose type no live supervisor of its queue handles; the
    warnings to print once the jobs are in: one per queue no live supervisor works."""
    live = [row for row in store.running_handlers()
            if not is_stale(row, config.heartbeat_interval)]
    unworked: dict[str, list[str]] = {}
    for job in jobs:
        handlers = [row for row in live if job.queue in row["queues"].split(",")]
        if not handlers:
            unworked.setdefault(job.queue, []).append(job.job_type)
        else:
            _refuse_unhandled(job, handlers)
    waits = "its jobs wait" if any(job.where for job in jobs) else "the job waits"
    return [f"{PROG}: warning: no running supervisor works queue {queue!r}: {waits} until "
            f"one that handles {_listed(types)} starts" for queue, types in unworked.items()]


def warn(warnings: Sequence[str]) -> None:
    """Print check_handled()'s warnings (after the jobs are in)."""
    for line in warnings:
        print(line, file=sys.stderr)


def _listed(job_types: Sequence[str]) -> str:
    """'a', 'b', 'c' and 4 more: a few job types by name."""
    named = ", ".join(repr(job_type) for job_type in job_types[:SHOWN_TYPES])
    more = len(job_types) - SHOWN_TYPES
    return named if more <= 0 else f"{named} and {more} more"


def _refuse_unhandled(job: Enqueued, handlers: Sequence[dict[str, Any]]) -> None:
    """UserError unless one of these supervisors of the job's queue handles its type."""
    handled: set[str] = set()
    for row in handlers:
        listed = job_types(row["job_types"])
        if listed is None or job.job_type in listed:
            return
        handled |= listed
    close = difflib.get_close_matches(job.job_type, sorted(handled), n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserError(f"{job.where}unknown job type {job.job_type!r}: no running supervisor "
                    f"of queue {job.queue!r} handles it{guess}; --force enqueues it anyway")
