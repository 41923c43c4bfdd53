"""What a supervisor counts for the per-minute rollup (prefork/supervisor/rollup.py):
each outcome its children report, a worker's death once its hand-back is known,
the rows to write (the minute under way too, with its counts so far), and
forgetting only what was written of the minutes that are over."""
import time
from datetime import timedelta

from prefork.jobs import JobStatus, Lease, Outcome
from prefork.supervisor.children import FinishedJob, RunningJob
from prefork.supervisor.rollup import Rollup, utc_minute


def finished(outcome, job_type="t", queue="q", seconds=2.0, job_id=1):
    ended = time.monotonic()
    return FinishedJob(RunningJob(Lease(job_id, "tok"), job_type, queue, ended - seconds),
                       outcome, ended)


def counts(rollup):
    return {process_id: [(row.queue, row.job_type, row.done, row.failed, row.dead,
                          round(row.run_seconds)) for row in rows]
            for process_id, rows in rollup.unsaved().items()}


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


def test_the_minute_under_way_is_written_with_its_counts_so_far_and_again_as_it_grows():
    rollup = Rollup()
    rollup.count(finished(Outcome.DONE), process_id=1)
    rollup.count(finished(Outcome.DONE), process_id=2)
    due = rollup.unsaved()
    assert sorted(due) == [1, 2] and due[1][0].minute <= utc_minute()
    rollup.written(1, due[1])
    assert sorted(rollup.unsaved()) == [2]   # only what the store does not have yet
    rollup.count(finished(Outcome.DEAD), process_id=1)
    (row,) = rollup.unsaved()[1]
    if row.minute == due[1][0].minute:   # the same minute: the row's counts so far, replaced
        assert (row.done, row.failed, row.dead) == (1, 1, 1)


def restamp(rollup, job_type, minutes):
    """Move the counts of `job_type` that many minutes off the minute they landed in."""
    for key in [key for key in rollup.tallies if key[2] == job_type]:
        moved = (key[0] + timedelta(minutes=minutes), *key[1:])
        rollup.tallies[moved] = rollup.tallies.pop(key)
        rollup.unsaved_keys.discard(key)
        rollup.unsaved_keys.add(moved)


def test_a_written_minute_is_forgotten_once_it_is_over_and_the_current_one_kept():
    rollup = Rollup()
    rollup.count(finished(Outcome.DONE, job_type="over"), process_id=1)
    rollup.count(finished(Outcome.DONE, job_type="current"), process_id=1)
    restamp(rollup, "over", -2)      # a minute that is over whatever the clock says now
    restamp(rollup, "current", +2)   # one that is not over yet
    rollup.written(1, rollup.unsaved()[1])
    assert rollup.unsaved() == {}
    assert [key[2] for key in rollup.tallies] == ["current"]   # kept to count on
