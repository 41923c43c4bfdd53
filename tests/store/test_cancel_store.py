"""Cancellation through the Store API (issue 16), on every backend: SQLite
(`-k sqlite`) and MySQL (both dialects where conftest.DIALECT_MODULES names this
module). How a supervisor stops a running job is test_cancel_supervisor.py's.

A ready or delayed job is cancelled at once; a running one is marked, and ends
cancelled by whichever way it leaves `reserved` but a completion; a finished
one keeps its result.
"""

import pytest
from leaving_reserved import LONG_AGO, at
from leaving_reserved import WAYS_OUT as SHARED_WAYS_OUT

import prefork
from prefork.jobs import JobStatus, Lease, new_job
from prefork.retry import Decision, RetryPolicy
from prefork.store.views import JobFilter

WORKER = "cancel-host:1"


def running_job(s, process_id=None, **job_args):
    """A new job, claimed ahead of the others: (its id, the Job)."""
    job_id = s.enqueue(new_job("noop", priority=-1000, **job_args))
    [job] = s.claim([job_args.get("queue", "default")], WORKER, 30, process_id=process_id)
    assert job.id == job_id
    return job_id, job


def assert_cancelled(db, job_id):
    row = db.row(job_id)
    assert row["status"] == JobStatus.CANCELLED, row
    assert row["finished_at"] is not None and row["cancel_requested_at"] is None
    assert row["lease_until"] is None
    return row


def test_ready_and_delayed_jobs_are_cancelled_at_once(backend_store, db):
    s = backend_store()
    ready = s.enqueue(new_job("noop"))
    delayed = s.enqueue(new_job("noop", delay=3600))
    report = s.cancel([ready, delayed])
    assert report == ([ready, delayed], [], [], [])
    for job_id in (ready, delayed):
        assert assert_cancelled(db, job_id)["last_error"] == "cancelled"
    assert s.claim(["default"], WORKER, 30) == []
    assert s.counts() == {"cancelled": 2}


def test_a_running_job_is_stopping_until_its_supervisor_finishes_it(backend_store, db):
    s = backend_store()
    process_id = s.register_process("cancel-host", 1, ["default"], 1, "test")
    other = s.register_process("other-host", 1, ["default"], 1, "test")
    assert s.cancel_requested(process_id) == set()
    job_id, job = running_job(s, process_id)
    assert s.cancel([job_id]) == ([], [job_id], [], [])
    row = db.row(job_id)
    assert row["status"] == JobStatus.RESERVED and row["cancel_requested_at"] is not None
    assert s.get(job_id)["cancel_requested_at"] is not None
    assert (s.cancel_requested(process_id), s.cancel_requested(other)) == ({job_id}, set())
    assert s.cancel([job_id]) == ([], [job_id], [], [])   # asked again: still stopping
    assert s.finish_cancelled(job.lease)
    assert assert_cancelled(db, job_id)["last_error"] == "cancelled"
    assert s.cancel_requested(process_id) == set()
    assert not s.finish_cancelled(job.lease)   # once only
    assert not s.finish_cancelled(Lease(job_id, "0" * 32))


# Every way but a completion that a job leaves `reserved` (store, db, job, its
# supervisor's id): with a cancellation pending, each ends it cancelled.
WAYS_OUT = {
    **SHARED_WAYS_OUT,
    "hand back": lambda s, db, job, _: s.hand_back(job.id, job.lease_token, "SIGKILL",
                                                   RetryPolicy(), 3) == JobStatus.CANCELLED,
    "hand back uncharged": lambda s, db, job, _: s.hand_back(
        job.id, job.lease_token, "SIGTERM", RetryPolicy(), 3, charge=False) == JobStatus.CANCELLED,
}


@pytest.mark.parametrize("way_out", list(WAYS_OUT))
def test_a_stopping_job_ends_cancelled_whichever_way_it_leaves_reserved(backend_store, db,
                                                                          way_out):
    s = backend_store()
    process_id = s.register_process("cancel-host", 1, ["default"], 1, "test")
    job_id, job = running_job(s, process_id)
    s.cancel([job_id])
    assert WAYS_OUT[way_out](s, db, job, process_id)
    assert_cancelled(db, job_id)
    assert s.cancel_requested(process_id) == set()
    assert s.claim(["default"], WORKER, 30) == []   # never run again


@pytest.mark.parametrize("finish", ["complete", "complete_many", "transaction",
                                    "complete_and_claim"])
def test_a_job_that_completes_after_the_cancel_request_stays_done(backend_store, db, finish):
    s = backend_store()
    job_id, job = running_job(s)
    s.cancel([job_id])
    if finish == "complete":
        assert s.complete(job)
    elif finish == "complete_many":
        assert s.complete_many([job.lease]) == {job_id}
    elif finish == "transaction":
        with job.transaction():
            pass
    else:
        assert s.complete_and_claim([job.lease], ["default"], WORKER, 30)[0] == {job_id}
    row = db.row(job_id)
    assert (row["status"], row["cancel_requested_at"]) == (JobStatus.DONE, None)
    assert s.cancel([job_id]) == ([], [], [job_id], [])


def test_finished_and_unknown_jobs_are_reported_and_left_alone(backend_store, db):
    s = backend_store()
    done_id, done = running_job(s)
    s.complete(done)
    dead_id, dead = running_job(s)
    s.fail(dead, "Boom", Decision(dead=True, delay=0))
    cancelled = s.enqueue(new_job("noop"))
    s.cancel([cancelled])
    before = {job_id: db.row(job_id) for job_id in (done_id, dead_id, cancelled)}
    report = s.cancel([done_id, 987654, dead_id, cancelled, done_id])
    assert report == ([], [], [done_id, dead_id, cancelled], [987654])
    assert {job_id: db.row(job_id) for job_id in before} == before
    assert s.cancel([]) == ([], [], [], [])


def test_cancel_matching_takes_the_unfinished_jobs_of_a_queue_and_type(backend_store, db):
    s = backend_store()
    ready = [s.enqueue(new_job("report", queue="q")) for _ in range(3)]
    delayed = s.enqueue(new_job("report", queue="q", delay=3600))
    running_id, _ = running_job(s, queue="q")   # a noop: another type
    other_type = s.enqueue(new_job("mail", queue="q"))
    other_queue = s.enqueue(new_job("report", queue="elsewhere"))
    report = s.cancel_matching("q", "report")
    assert sorted(report.cancelled) == sorted(ready + [delayed])
    assert report.stopping == report.finished == report.missing == []
    assert db.row(other_type)["status"] == db.row(other_queue)["status"] == JobStatus.READY
    report = s.cancel_matching("q", None)
    assert (report.cancelled, report.stopping) == ([other_type], [running_id])
    report = s.cancel_matching(None, "report")
    assert report.cancelled == [other_queue]


def test_retry_reruns_cancelled_jobs_only_when_asked(backend_store, db):
    s = backend_store()
    cancelled = s.enqueue(new_job("noop", queue="q"))
    dead_id, dead = running_job(s)
    s.fail(dead, "Boom", Decision(dead=True, delay=0))
    s.cancel([cancelled])
    assert s.retry_dead([cancelled]) == 0
    assert s.retry_dead() == 1   # the dead one
    assert db.row(cancelled)["status"] == JobStatus.CANCELLED
    both = (JobStatus.DEAD, JobStatus.CANCELLED)
    assert s.retry_dead([cancelled], statuses=both) == 1
    row = db.row(cancelled)
    assert (row["status"], row["attempts"], row["finished_at"]) == (JobStatus.READY, 0, None)
    assert [job.id for job in s.claim(["q"], WORKER, 30)] == [cancelled]


def test_retry_of_a_cancelled_job_reads_the_limits_published_since(backend_store, db):
    from prefork.limits.rules import LimitRule
    s = backend_store()
    job_id = s.enqueue(new_job("report"))
    s.cancel([job_id])
    s.publish_limits([LimitRule("report", concurrency=1)], ["report"])
    assert s.retry_dead(statuses=(JobStatus.CANCELLED,)) == 1
    assert db.row(job_id)["limited"] == 1


def test_prune_removes_old_cancelled_jobs(backend_store, db):
    s = backend_store()
    old, recent = s.enqueue(new_job("noop")), s.enqueue(new_job("noop"))
    s.cancel([old, recent])
    db.execute("UPDATE prefork_jobs SET finished_at = %s WHERE id = %s", (at(db, LONG_AGO), old))
    assert s.count_finished(JobStatus.CANCELLED, 3600) == 1
    assert s.prune_finished(JobStatus.CANCELLED, 3600) == 1
    assert db.row(old) is None and db.row(recent) is not None


def test_counts_status_stats_and_the_dashboard_know_cancelled(backend_store):
    s = backend_store()
    ids = [s.enqueue(new_job("noop", queue="q")) for _ in range(3)]
    s.cancel(ids[:2])
    assert s.queue_stats(["q"])["q"]["cancelled"] == 2
    _, live, _, _ = s.status()
    assert [(row[1], int(row[3])) for row in live if row[1] == JobStatus.CANCELLED] == \
        [(JobStatus.CANCELLED, 2)]
    [overview] = s.queue_overview()
    assert (overview.ready, overview.cancelled) == (1, 2)
    page = s.find_jobs(JobFilter(status=JobStatus.CANCELLED), None, 10)
    assert sorted(row["id"] for row in page.rows) == ids[:2]
    assert {row["id"] for row in s.find_jobs(JobFilter(), None, 10).rows} == set(ids)


def test_prefork_cancel_rides_on_the_callers_transaction(backend_store, db):
    s = backend_store()
    ready = s.enqueue(new_job("noop"))
    running_id, _ = running_job(s)
    conn = db.app_connection()
    try:
        report = prefork.cancel(conn, [ready, running_id, 424242])
        assert report == ([ready], [running_id], [], [424242])
        conn.rollback()
        assert db.row(ready)["status"] == JobStatus.READY, "cancel must not commit on its own"
        assert db.row(running_id)["cancel_requested_at"] is None
        assert prefork.cancel(conn, ready) == ([ready], [], [], [])
        conn.commit()
        assert db.row(ready)["status"] == JobStatus.CANCELLED
    finally:
        conn.close()
