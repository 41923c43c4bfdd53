"""What a supervisor counts for the per-minute rollup (prefork/supervisor/rollup.py):
each outcome its children report, a worker's death once its hand-back is known,
the minutes due for writing, and forgetting only what was written."""
import time
from datetime import timedelta

from prefork.jobs import JobStatus, Lease, Outcome
from prefork.supervisor.children import FinishedJob, RunningJob
from prefork.supervisor.rollup import Rollup, utc_minute


def finished(outcome, job_type="t", queue="q", seconds=2.0, job_id=1):
    ended = time.monotonic()
    return FinishedJob(RunningJob(Lease(job_id, "tok"), job_type, queue, ended - seconds),
                       outcome, ended)


def counts(rollup, before=None):
    return {process_id: [(row.queue, row.job_type, row.done, row.failed, row.dead,
                          round(row.run_seconds)) for row in rows]
            for process_id, rows in rollup.due(before).items()}


def test_done_failed_and_dead_outcomes_are_counted_the_others_not():
    rollup = Rollup()
    for outcome in (Outcome.DONE, Outcome.DONE, Outcome.RETRY, Outcome.DEAD, Outcome.LOST,
                    Outcome.RELEASED, Outcome.UNSAVED):
        rollup.count(finished(outcome), process_id=7)
    rollup.count(finished(Outcome.DONE, job_type="u"), process_id=7)
    assert counts(rollup) == {7: [("q", "t", 2, 2, 1, 8), ("q", "u", 1, 0, 0, 2)]}


def test_a_workers_death_counts_once_its_hand_back_says_what_became_of_the_job():
    rollup = Rollup()
    rollup.crash(finished(Outcome.DONE, job_id=1).job, process_id=3)
    rollup.crash(finished(Outcome.DONE, job_id=2).job, process_id=3)
    rollup.crash(finished(Outcome.DONE, job_id=3).job, process_id=3)
    assert counts(rollup) == {}
    rollup.handed_back(1, JobStatus.DEAD)
    rollup.handed_back(2, JobStatus.READY)
    rollup.handed_back(3, None)          # another worker had it: not ours to count
    rollup.handed_back(4, JobStatus.DEAD)   # not a death we saw: a held job, say
    assert counts(rollup) == {3: [("q", "t", 0, 2, 1, 4)]}


def test_only_minutes_that_are_over_are_due_and_written_ones_are_forgotten():
    rollup = Rollup()
    counted_from = utc_minute()   # the minute the counts land in, or a later one
    rollup.count(finished(Outcome.DONE), process_id=1)
    rollup.count(finished(Outcome.DONE), process_id=2)
    assert rollup.due(counted_from) == {}
    due = rollup.due(utc_minute() + timedelta(minutes=1))
    assert sorted(due) == [1, 2]
    rollup.written(1, due[1])
    assert sorted(rollup.due(None)) == [2]
