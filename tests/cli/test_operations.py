"""The operator tables on every backend: registry and pruning, pausing, restart
requests, status, pruning and discarding (issue 6)."""
import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from prefork.cli import status_report as status_report
from prefork.jobs import new_job
from prefork.retry import Decision
from prefork.store.registry_rows import MAX_JOB_TYPES_BYTES, Published, job_types

WORKER = "host-a:10"
CLOCK_SLACK = 2.0   # seconds between this host's clock and the database's


def register(store, queues=("default",), workers=2):
    return store.register_process("host-a", 100, list(queues), workers, "0.1.0")


def test_a_silent_supervisor_is_pruned_and_its_jobs_come_back(backend_store, db):
    s = backend_store()
    alive, silent = register(s), register(s)
    held = [s.enqueue(new_job("noop", key=f"k{i}")) for i in range(3)]
    other = s.enqueue(new_job("noop", key="other"))
    jobs = s.claim(["default"], WORKER, 300, limit=3, process_id=silent)
    assert sorted(job.id for job in jobs) == held
    s.claim(["default"], WORKER, 300, process_id=alive)
    db.sleep(0.3)
    assert s.heartbeat(alive, ["default"], 2, "[]")
    assert s.prune_silent(0.2) == [(silent, 3)]
    assert s.prune_silent(0.2) == []          # once only
    assert not s.heartbeat(silent, ["default"], 2, "[]")   # it learns it was pruned
    for job_id in held:
        row = db.row(job_id)
        assert (row["status"], row["last_error"], row["attempts"]) == \
            ("ready", "supervisor vanished", 1)
    assert db.row(other)["status"] == "reserved"   # the live supervisor's job stays
    s.stop_process(alive)
    assert status_report.build(s.status(), heartbeat_interval=5.0)["supervisors"] == []


def test_the_registry_holds_each_supervisors_job_types_and_interval(backend_store, db):
    """What a supervisor publishes (issue 28): at registration, again after a reload (a
    pruned row is left alone), NULL from a release that publishes nothing, and no list
    at all past the bound (its supervisor may then handle any type)."""
    s = backend_store()
    listed = s.register_process("host-a", 1, ["default", "mail"], 2, "0.2.0",
                                Published.of(["b.two", "a.one", "b.two"], 1.0))
    silent = s.register_process("host-b", 2, ["default"], 2, "0.1.0")
    many = [f"type.{n:06d}.{'x' * 100}" for n in range(MAX_JOB_TYPES_BYTES // 100)]
    unlisted = s.register_process("host-c", 3, ["default"], 2, "0.2.0",
                                  Published.of(many, 2.5))
    rows = {(row["queues"], row["job_types"], row["heartbeat_interval"])
            for row in s.running_handlers()}
    assert rows == {("default,mail", "a.one,b.two", 1.0), ("default", None, None),
                    ("default", None, 2.5)}
    assert all(row["heartbeat_age_s"] < 60 for row in s.running_handlers())
    assert job_types("a.one,b.two") == {"a.one", "b.two"} and job_types(None) is None

    s.publish(listed, Published.of(["c.three"], 3.0))   # after a reload
    db.sleep(0.3)
    assert s.prune_silent(0.2, limit=10) != []   # every row here is silent: pruned
    s.publish(unlisted, Published.of(["d.four"], 4.0))   # pruned: left alone
    assert s.running_handlers() == []
    found = {process: tuple(db.scalar(f"SELECT {column} FROM prefork_processes WHERE id = %s",
                                      (process,)) for column in ("job_types", "heartbeat_interval"))
             for process in (listed, silent, unlisted)}
    assert found == {listed: ("c.three", 3.0), silent: (None, None), unlisted: (None, 2.5)}


def test_a_paused_queue_is_not_claimed_and_resumes(backend_store):
    s = backend_store()
    s.enqueue(new_job("noop", queue="mail"))
    s.enqueue(new_job("noop", queue="default"))
    s.set_paused("mail", True)
    assert s.ready_count(["mail", "default"], 10) == 1
    assert [job.queue for job in s.claim(["mail", "default"], WORKER, 30, limit=5)] == ["default"]
    assert s.control_state("host-a")[2] == {"mail"}
    s.set_paused("mail", False)
    assert s.control_state("host-a")[2] == set()
    assert [job.queue for job in s.claim(["mail"], WORKER, 30)] == ["mail"]


def test_restart_requests_per_host_and_for_all(backend_store):
    s = backend_store()
    now, restart_at, _ = s.control_state("host-a")
    assert restart_at is None
    everyone = s.request_restart("*")
    assert s.control_state("host-a")[1] == everyone
    later = s.request_restart("host-a", at=everyone.replace(year=everyone.year + 1))
    assert s.control_state("host-a")[1] == later
    assert s.control_state("host-b")[1] == everyone
    assert abs((everyone - now).total_seconds()) < 5


def test_status_counts_live_jobs_and_recent_done_per_queue(backend_store, db):
    s = backend_store()
    process = register(s, workers=3)
    children = [{"pid": 7, "slot": 1, "state": "busy", "job_id": 1, "type": "noop", "seconds": 2}]
    s.heartbeat(process, ["default"], 3, json.dumps(children))
    # The job left ready has been due for an hour (priority 5: claimed after the
    # others); the delayed one is not due, the claimed ones are not ready.
    due_since = datetime.now(timezone.utc) - timedelta(hours=1)
    enqueued = time.monotonic()
    s.enqueue_many([new_job("noop") for _ in range(3)] + [new_job("noop", delay=3600)]
                   + [new_job("noop", run_at=due_since, priority=5)]
                   + [new_job("noop", queue="mail")])
    done, dead, reserved = s.claim(["default"], WORKER, 30, limit=3)
    s.complete(done)
    s.fail(dead, "Boom", Decision(dead=True, delay=0))
    report = status_report.build(s.status(), heartbeat_interval=5.0)
    waited = time.monotonic() - enqueued
    default = dict(report["queues"]["default"])
    age = default.pop("oldest_ready_age_s")
    # An hour, by the time stamp set above, plus what this test took; the slack
    # covers the database's clock against this host's.
    assert 3600 - CLOCK_SLACK <= age <= 3600 + waited + CLOCK_SLACK
    assert default == {
        "ready": 1, "delayed": 1, "reserved": 1, "dead": 1, "cancelled": 0, "waiting": 0, "done_last_hour": 1,
        "jobs_per_min": round(1 / 60, 2), "paused": False}
    assert report["queues"]["mail"]["ready"] == 1
    (supervisor,) = report["supervisors"]
    assert supervisor["children"] == children and supervisor["workers"] == 3
    assert "busy job 1 noop 2s" in status_report.render(report)


def test_prune_deletes_old_finished_jobs_in_batches_and_discard_only_dead(backend_store, db):
    s = backend_store()
    s.enqueue_many([new_job("noop") for _ in range(5)])
    jobs = s.claim(["default"], WORKER, 30, limit=5)
    for job in jobs[:4]:
        s.complete(job)
    s.fail(jobs[4], "Boom", Decision(dead=True, delay=0))
    assert s.count_finished("done", 3600) == 0   # none is that old
    db.sleep(0.2)
    assert s.count_finished("done", 0.1) == 4
    assert s.prune_finished("done", 0.1, batch=3) == 3
    assert s.prune_finished("done", 0.1, batch=3) == 1
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 1
    assert s.discard_dead([jobs[0].id, jobs[4].id]) == 1   # jobs[0] is gone already
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 0


def test_claims_record_the_supervisor(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    process = register(s)
    s.claim(["default"], WORKER, 30, process_id=process)
    assert db.row(job_id)["process_id"] == process


@pytest.mark.parametrize("text,seconds", [("7d", 604800), ("12h", 43200), ("90s", 90),
                                          ("1.5m", 90), ("2w", 1209600)])
def test_prune_durations(text, seconds):
    from prefork.cli.operations import duration
    assert duration(text) == seconds


def test_prune_takes_a_zero_age_as_an_age(tmp_path):
    """0s prunes everything finished: it must not be read as "no age given"."""
    from conftest import run_cli
    dsn = f"sqlite:///{tmp_path / 'q.db'}"
    assert run_cli("migrate", dsn=dsn).returncode == 0
    result = run_cli("prune", "--done-older-than", "0s", dsn=dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["deleted 0 done jobs", "deleted 0 done workflows",
                                          "deleted 0 old supervisor records"]
