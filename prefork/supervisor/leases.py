"""The leases the children hold, kept by the parent: extended while jobs run,
handed back when a child dies, and the completions a child has not written
yet written on its behalf (write-behind).

Functions of the children and the parent's Upkeep; each returns the jobs it
finished, for the loop to count and tell the observers.
"""
from typing import Callable, Collection, Iterable, Optional

from ..events import Event
from ..jobs import Job, Lease, Outcome
from ..logs import event
from .children import ChildProcess, FinishedJob
from .decisions import hand_jobs_at_fork, lease_extension_due, write_behind_due
from .upkeep import FORKED_PER_JOB, HANDED, Upkeep


def extend(upkeep: Upkeep, children: Iterable[ChildProcess], now: float,
           lease_seconds: float) -> None:
    """Extend the leases that need it: jobs running for a third of the lease, and
    every held or unsaved one (those wait behind others, however fast they are).
    A pass that did what it had to is stamped for the children (parent_pulse.py)."""
    leases: list[Lease] = []
    for child in children:
        if child.job and lease_extension_due(child.job.since, now, lease_seconds):
            leases.append(child.job.lease)
        leases += child.held
        leases += [finished.job.lease for finished in child.unsaved.values()]
    if not leases or upkeep.extend(leases):
        upkeep.pulse.extended(now)


def complete_and_claim(upkeep: Upkeep, children: Iterable[ChildProcess], count: int
                       ) -> tuple[list[FinishedJob], list[Job]]:
    """Claim up to count jobs for children to be forked with them (--max-items 1),
    writing in the same round trip the completions such children left to us:
    (the jobs finished, the jobs claimed); nothing while the database is away, or
    when the children are to claim for themselves (decisions.hand_jobs_at_fork,
    with the limits in force as the upkeep last took them), or while we are silent
    (worker/parent_pulse.py: such children would give their jobs up at once)."""
    if not hand_jobs_at_fork(upkeep.config, bool(upkeep.limits.rules)) \
            or upkeep.pulse.silent(upkeep.config):
        return [], []
    return write_and_claim(upkeep, [child for child in children if child.parent_completes],
                           count, FORKED_PER_JOB)


def write_and_claim(upkeep: Upkeep, children: Iterable[ChildProcess], count: int,
                    why: str) -> tuple[list[FinishedJob], list[Job]]:
    """Write the completions the children left to us and claim up to count jobs for
    them, in one round trip: (the jobs finished, the jobs claimed); nothing while the
    database is away (the completions wait for the next try). Logged as _saved says."""
    owing = [child for child in children if child.unsaved]
    unsaved = [finished for child in owing for finished in child.unsaved.values()]
    answer = upkeep.complete_and_claim([finished.job for finished in unsaved], count,
                                       _upkeep_logs(why))
    if answer is None:
        return [], []
    completed, claimed = answer
    for child in owing:
        child.unsaved = {}
    return _saved(unsaved, completed, why), claimed


def write_unsaved(upkeep: Upkeep, child: ChildProcess, why: str) -> Optional[list[FinishedJob]]:
    """Write the completions the child has not written yet: those jobs ran to
    success. The jobs, done or lost; None when the database is away. (Those of a
    child forked per job or handed its jobs are ours to write whatever the occasion:
    logged so, as _saved says.)"""
    unsaved = list(child.unsaved.values())
    why = ours_because(child) or why
    completed = upkeep.complete([finished.job for finished in unsaved], _upkeep_logs(why))
    if completed is None:
        return None
    child.unsaved = {}
    return _saved(unsaved, completed, why)


def _upkeep_logs(why: str) -> Optional[str]:
    """What the upkeep logs the completions we write as: `job_completed_by_supervisor`
    for why, except those of jobs we handed (None: _saved logs them)."""
    return None if why == HANDED else why


def _saved(unsaved: Iterable[FinishedJob], completed: Collection[int],
           why: str) -> list[FinishedJob]:
    """The unsaved jobs, done or lost as the write found them. Those we handed are
    logged as their worker would have, whatever wrote them (a claim, a reap)."""
    finished = [done.saved(done.job.lease.job_id in completed) for done in unsaved]
    if why == HANDED:
        for done in finished:
            _log_as_its_worker(done)
    return finished


def _log_as_its_worker(finished: FinishedJob) -> None:
    """A handed job's completion, written by us: logged as its worker would have."""
    job_id, job_type = finished.job.lease.job_id, finished.job.type
    if finished.outcome is Outcome.DONE:
        event(Event.JOB_COMPLETED, job_id=job_id, type=job_type,
              elapsed_ms=round(finished.seconds * 1000, 1))
    else:
        event(Event.JOB_LEASE_LOST, job_id=job_id, type=job_type)


def ours_because(child: ChildProcess) -> Optional[str]:
    """Why a child's completions are ours to write whatever the occasion, if they are."""
    if not child.parent_completes:
        return None
    return HANDED if child.handed else FORKED_PER_JOB


def write_behind_slow_jobs(upkeep: Upkeep, children: Iterable[ChildProcess],
                           now: float) -> list[FinishedJob]:
    """A child writes a batch's completions with the batch's last job. When a
    slow job holds that up, we write them, so done jobs read done soon."""
    written: list[FinishedJob] = []
    for child in children:
        if child.unsaved and write_behind_due(child.unsaved_since, now):
            written += write_unsaved(upkeep, child, "its worker is busy with a slower job") or []
    return written


def hand_back_all(upkeep: Upkeep, child: ChildProcess, cause: str) -> list[FinishedJob]:
    """After a child's death: its running job goes back, charged unless we killed the
    child to stop it (so --max-crashes bounds the forks any job may cost: a crash, an
    exit, os._exit(), a database error), its held jobs too (never started: not their
    fault, uncharged), and its
    unsaved completions are written (or, with the database away, their jobs go
    back to run again). Returns the unsaved jobs written."""
    if child.job is not None:
        upkeep.hand_back(child.job.lease, cause, child.charge_job)
        child.job = None
    for lease in child.held:
        upkeep.hand_back(lease, f"{cause} before it started", False)
    child.held = ()
    if not child.unsaved:
        return []
    written = write_unsaved(upkeep, child, "its worker died")
    if written is not None:
        return written
    for finished in child.unsaved.values():   # ran, but unrecorded: they run again
        upkeep.hand_back(finished.job.lease, f"{cause} before its completion was written", False)
    child.unsaved = {}
    return []


def after_reconnection(upkeep: Upkeep, children: Iterable[ChildProcess],
                       database_back: Callable[[], None], now: float) -> None:
    """Once our connection came back after a loss (maybe to another host): children
    failing at start for want of a database may start at once (database_back), and
    the jobs reserved in our name that none of them holds go back (strays.py)."""
    if upkeep.reconnected:
        upkeep.reconnected = False
        database_back()
    upkeep.strays_when_due(now, list(children))
