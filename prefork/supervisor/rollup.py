"""What a supervisor counts for the dashboard's per-minute rollup (prefork_minutes):
the outcomes its children report, by minute (this host's UTC clock), queue, job
type and its registry id, kept here until the store has them.

Nothing is counted on the job's path: the parent learns each outcome from the
pipe (children.FinishedJob: type, queue, run time, outcome), and upkeep.py
writes what changed every heartbeat interval, on the parent's own connection:
the minute under way too, so that the dashboard shows a job within seconds of
its end. A row is always written with its counts so far (they replace the row),
so the current minute is written again as it grows, and a write repeated after a
lost answer counts nothing twice. A write that fails leaves its counts here for
the next one; a minute that is over is forgotten once the store has it.
"""
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from ..jobs import JobStatus, Outcome, utc_now
from ..store.views import MinuteCounts
from .children import FinishedJob, RunningJob

@dataclass
class Tally:
    done: int = 0
    failed: int = 0
    dead: int = 0
    run_seconds: float = 0.0


# (minute, queue, job type, process id)
Key = tuple[datetime, str, str, int]


def utc_minute(moment: Optional[datetime] = None) -> datetime:
    """The minute (naive UTC, truncated) of `moment`, or of now."""
    moment = moment or utc_now()
    return moment.replace(second=0, microsecond=0)


class Rollup:
    def __init__(self) -> None:
        self.tallies: dict[Key, Tally] = {}
        self.unsaved_keys: set[Key] = set()   # counted since the store last had them
        # Jobs of children that died holding them, until their hand-back says
        # whether the death made them dead: (job, seconds run, process id).
        self.crashed: dict[int, tuple[RunningJob, float, int]] = {}

    def count(self, finished: FinishedJob, process_id: int) -> None:
        """One job a child ran to an outcome (done, retry, dead; others count nothing)."""
        if finished.outcome in (Outcome.DONE, Outcome.RETRY, Outcome.DEAD):
            self._add(finished.job, finished.seconds, process_id,
                      done=finished.outcome is Outcome.DONE,
                      dead=finished.outcome is Outcome.DEAD)

    def crash(self, job: RunningJob, process_id: int) -> None:
        """A child died running `job`, charged to the job: counted as a failed attempt
        once its hand-back tells whether it is dead (handed_back)."""
        self.crashed[job.lease.job_id] = (job, time.monotonic() - job.since, process_id)

    def handed_back(self, job_id: int, status: Optional[JobStatus]) -> None:
        """The hand-back of a job: count its crash (None: another worker had it)."""
        crashed = self.crashed.pop(job_id, None)
        if crashed is not None and status is not None:
            job, seconds, process_id = crashed
            self._add(job, seconds, process_id, done=False, dead=status == JobStatus.DEAD)

    def _add(self, job: RunningJob, seconds: float, process_id: int, done: bool,
             dead: bool) -> None:
        key = (utc_minute(), job.queue, job.type, process_id)
        tally = self.tallies.setdefault(key, Tally())
        tally.done += done
        tally.failed += not done
        tally.dead += dead
        tally.run_seconds += seconds
        self.unsaved_keys.add(key)

    def unsaved(self) -> dict[int, list[MinuteCounts]]:
        """The rows to write, by process id: those counted since the store last had them,
        each with its minute's counts so far (the current minute's too)."""
        by_process: dict[int, list[MinuteCounts]] = {}
        for key in sorted(self.unsaved_keys):
            minute, queue, job_type, process_id = key
            tally = self.tallies[key]
            by_process.setdefault(process_id, []).append(MinuteCounts(
                minute, queue, job_type, tally.done, tally.failed, tally.dead,
                round(tally.run_seconds, 6)))
        return by_process

    def written(self, process_id: int, counts: list[MinuteCounts]) -> None:
        """The store has these rows now; forget the written rows of the minutes that
        are over (their counts are final), keep the current minute's to count on."""
        for row in counts:
            self.unsaved_keys.discard((row.minute, row.queue, row.job_type, process_id))
        current = utc_minute()
        for key in [key for key in self.tallies
                    if key[0] < current and key not in self.unsaved_keys]:
            del self.tallies[key]
