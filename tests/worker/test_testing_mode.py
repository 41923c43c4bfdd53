"""prefork.testing: jobs drained inline, with production's retry and dead semantics.

drain() runs the real worker loop on the real store (a temporary SQLite file by
default, or MariaDB), in the test's process: retries run within the drain (the
backoff is milliseconds), a job out of attempts goes dead and says why, and a job
that enqueues itself forever is stopped.
"""
import os
import subprocess
import sys
import time

import pytest

import prefork
import prefork.testing
from prefork import client as client_module
from prefork.errors import RejectedJob
from prefork.testing import DeadJobs, TooManyJobs


class CustomerError(Exception):
    pass


@prefork.handler("inline.flaky")
def flaky(job):
    if job.attempt < job.payload["succeed_on"]:
        raise ConnectionResetError(f"attempt {job.attempt} lost the connection")


@prefork.handler("inline.patient", backoff=600)
def patient(job):
    """Waits ten minutes between attempts in production."""
    if job.attempt < 3:
        raise TimeoutError("the mail server did not answer")


@prefork.handler("inline.broken")
def broken(job):
    raise CustomerError(f"customer {job.payload['customer']} has no billing address")


@prefork.handler("inline.forever")
def forever(job):
    client_module.enqueue_task("inline.forever", {"generation": job.payload["generation"] + 1})


@prefork.handler("inline.fan_out")
def fan_out(job):
    for n in range(job.payload["children"]):
        client_module.enqueue_task("inline.flaky", {"succeed_on": 2, "child": n})
    client_module.enqueue_task("inline.flaky", {"succeed_on": 1}, delay=3600)


@prefork.handler("inline.stops_itself")
def stops_itself(job):
    """Ends as a cancelled job does when the supervisor cancels it mid-run."""
    raise prefork.JobCancelled()


@pytest.fixture(params=["sqlite", "mysql"])
def inline_queue(request):
    """An inline queue on a temporary SQLite file (the default) or on the test MariaDB."""
    target = None
    if request.param == "mysql":
        request.getfixturevalue("clean_db")
        target = request.getfixturevalue("make_config")()
    with prefork.testing.inline(target) as queue:
        yield queue


def test_a_job_failing_twice_then_succeeding_is_done_with_three_attempts(inline_queue):
    job_id = inline_queue.enqueue("inline.flaky", {"succeed_on": 3})
    started = time.monotonic()
    result = inline_queue.drain()
    assert time.monotonic() - started < 5, "the retries waited milliseconds, not seconds"
    assert (result.done, result.dead, result.attempts, result.retries) == ([job_id], [], 3, 2)
    assert str(result.errors[job_id]) == "attempt 2 lost the connection"
    row = inline_queue.get(job_id)
    assert (row["status"], row["attempts"]) == ("done", 3)


def test_a_job_ended_by_job_cancelled_is_listed_as_cancelled_and_not_retried(inline_queue):
    cancelled = inline_queue.enqueue("inline.stops_itself")
    done = inline_queue.enqueue("inline.flaky", {"succeed_on": 1})
    result = inline_queue.drain()
    assert (result.cancelled, result.done, result.dead, result.attempts) == \
        ([cancelled], [done], [], 2)
    row = inline_queue.get(cancelled)
    assert (row["status"], row["attempts"]) == ("cancelled", 1)


def test_a_handlers_own_backoff_is_cut_to_milliseconds_too(inline_queue):
    job_id = inline_queue.enqueue("inline.patient")
    result = inline_queue.drain()
    assert (result.done, result.attempts, result.scheduled) == ([job_id], 3, 0)


def test_a_job_always_failing_goes_dead_after_max_attempts(inline_queue):
    job_id = inline_queue.enqueue("inline.broken", {"customer": 42}, max_attempts=3)
    result = inline_queue.drain(raise_on_dead=False)
    assert (result.done, result.dead, result.attempts, result.retries) == ([], [job_id], 3, 2)
    assert isinstance(result.errors[job_id], CustomerError)
    row = inline_queue.get(job_id)
    assert (row["status"], row["attempts"]) == ("dead", 3)
    assert "CustomerError" in row["last_error"]


def test_a_dead_job_fails_the_drain_with_the_handlers_exception(inline_queue):
    done_id = inline_queue.enqueue("inline.flaky", {"succeed_on": 1})
    dead_id = inline_queue.enqueue("inline.broken", {"customer": 7}, max_attempts=2)
    with pytest.raises(DeadJobs) as raised:
        inline_queue.drain()
    assert str(raised.value) == (f"1 job(s) went dead in drain(): job {dead_id} "
                                 "(inline.broken): CustomerError: customer 7 has no "
                                 "billing address")
    assert isinstance(raised.value.__cause__, CustomerError)   # its traceback is shown
    assert raised.value.summary.done == [done_id]
    assert inline_queue.get(done_id)["status"] == "done", "the drain ran to its end"


def test_a_job_that_enqueues_itself_is_stopped_at_max_jobs(inline_queue):
    inline_queue.enqueue("inline.forever", {"generation": 0})
    with pytest.raises(TooManyJobs, match=r"drain\(\) ran 25 attempts and jobs are still "
                       r"ready \('inline.forever' ran 25 times") as raised:
        inline_queue.drain(max_jobs=25)
    assert len(raised.value.summary.done) == raised.value.summary.attempts == 25
    with pytest.raises(ValueError, match="max_jobs must be a whole number of at least 1"):
        inline_queue.drain(max_jobs=0)


def test_jobs_enqueued_by_handlers_run_in_the_same_drain_but_not_future_ones(inline_queue):
    parent = inline_queue.enqueue("inline.fan_out", {"children": 3})
    result = inline_queue.drain()
    assert result.done[0] == parent and len(result.done) == 4
    assert (result.attempts, result.retries, result.scheduled) == (7, 3, 1)


def test_unknown_job_types_go_dead_as_in_production(inline_queue):
    job_id = inline_queue.enqueue("inline.nobody_handles_this")
    result = inline_queue.drain(raise_on_dead=False)
    assert result.dead == [job_id] and result.attempts == 1
    assert isinstance(result.errors[job_id], RejectedJob)


def test_only_the_configured_queues_are_drained_unless_named(inline_queue):
    job_id = inline_queue.enqueue("inline.flaky", {"succeed_on": 1}, queue="mail")
    assert inline_queue.drain().done == []
    assert inline_queue.drain(queues="mail").done == [job_id]


def test_the_default_sqlite_file_is_removed_and_the_default_client_restored():
    before = client_module.set_default_client(None)
    client_module.set_default_client(before)
    with prefork.testing.inline() as queue:
        path = queue.config.dsn.removeprefix("sqlite:///")
        assert os.path.exists(path)
        assert client_module.default_client() is queue.client
        job_id = client_module.enqueue_task("inline.flaky", {"succeed_on": 1})
        assert queue.drain().done == [job_id]
    assert not os.path.exists(os.path.dirname(path))
    assert client_module.set_default_client(before) is before


def test_production_processes_do_not_load_the_test_mode():
    loaded = subprocess.run([sys.executable, "-c", "import sys, prefork; print(sorted(m for m in "
                             "('prefork.testing', 'pytest') if m in sys.modules))"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout == "[]\n"
