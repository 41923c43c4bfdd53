"""What a cancellation answers: which of the jobs asked for it cancelled now,
which its supervisor is stopping, which had already finished and which do not
exist. Shared by the stores, `prefork-queue cancel` and prefork.cancel()."""
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from .jobs import FINISHED_STATES, JobStatus


class CancelReport(NamedTuple):
    """What a cancel did, as lists of job ids: `cancelled` (ready, delayed or waiting
    in a workflow: cancelled now, never run), `stopping` (running: its supervisor stops it, then it ends
    cancelled), `finished` (done, dead or cancelled already: left as they are) and
    `missing` (no such job: never was, or pruned)."""

    cancelled: list[int]   # ready, delayed or waiting: cancelled now, never run
    stopping: list[int]    # running: its supervisor stops it, then it ends cancelled
    finished: list[int]    # done, dead or cancelled already: left as they are
    missing: list[int]     # no such job (never was, or pruned)


def report(wanted: Sequence[int], states: Mapping[int, str]) -> CancelReport:
    """What a cancellation did to each job asked for, from its state before it (as
    the store read it: a JobStatus or its text)."""
    finished = {state.value for state in FINISHED_STATES}
    return CancelReport(
        cancelled=[job_id for job_id in wanted
                   if states.get(job_id) in (JobStatus.READY, JobStatus.WAITING)],
        stopping=[job_id for job_id in wanted if states.get(job_id) == JobStatus.RESERVED],
        finished=[job_id for job_id in wanted if states.get(job_id) in finished],
        missing=[job_id for job_id in wanted if job_id not in states])


def joined(reports: Iterable[CancelReport]) -> CancelReport:
    """One report of several batches'."""
    parts = list(reports)
    return CancelReport(**{name: [job_id for part in parts for job_id in getattr(part, name)]
                           for name in CancelReport._fields})
