"""Hooks (@prefork.on_success, on_failure, on_dead) under a real supervisor, on SQLite and
on MariaDB: each hook sees its attempt once the outcome is committed, and a hook that
raises, hangs past hook_timeout or ends its thread (sys.exit(), SystemExit) changes
nothing of the job's state or the worker's bookkeeping; a hung hook holds the worker
up to its bound only, and never counts against the job's hard timeout."""
import json

import pytest
from conftest import wait_until
from harness import assert_never_logged, supervisor_starter

from prefork.jobs import new_job

BASE_ARGS = ("--app", "hooks_app", "--workers", "1", "--poll-interval", "0.2",
             "--retry-base", "0.05", "--retry-cap", "0.1")
HANDLER_ERROR = "ValueError: handler failed on attempt 2"
# What each misbehaviour leaves in hook_failed's error.
HOOK_ERRORS = {"raise": "RuntimeError: hook boom", "sys_exit": "SystemExit: 3",
               "system_exit": "SystemExit"}


@pytest.fixture
def supervisor(tmp_path, queue_dsn, db):
    with supervisor_starter(tmp_path, queue_dsn, *BASE_ARGS) as start:
        yield start


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_status(db, job_id, status):
    """The job's row, once the job is in `status`."""
    def reached():
        row = db.row(job_id)
        return row if row["status"] == status else None
    return wait_until(reached, timeout=60, interval=0.1, message=f"job {job_id} {status}")


def test_each_hook_sees_its_attempt_after_the_outcome_is_committed(supervisor, backend_store,
                                                                   db, tmp_path):
    record = tmp_path / "hooks.jsonl"
    store = backend_store()
    payload = {"record": str(record)}
    done_id = store.enqueue(new_job("hooks.ok", payload, key="the-key"))
    dead_id = store.enqueue(new_job("hooks.fail", payload, max_attempts=2))
    sup = supervisor()
    wait_status(db, done_id, "done")
    wait_status(db, dead_id, "dead")
    seen = wait_until(lambda: (lambda found: found if len(found) == 4 else None)(records(record)),
                      timeout=30, message="4 hook calls")
    assert [(call["kind"], call["job_id"], call["number"], call["outcome"]) for call in seen] == [
        ("success", done_id, 1, "done"), ("failure", dead_id, 1, "retry"),
        ("failure", dead_id, 2, "dead"), ("dead", dead_id, 2, "dead")]
    success, retried, failed, dead = seen
    assert (success["type"], success["queue"], success["key"], success["max_attempts"],
            success["error"], success["exception"]) == \
        ("hooks.ok", "default", "the-key", 5, None, None)
    assert (retried["error"], retried["dead"], retried["exception"]) == \
        ("ValueError: handler failed on attempt 1", False,
         "ValueError('handler failed on attempt 1')")
    assert retried["retry_in"] is not None and retried["retry_in"] >= 0
    assert (failed["error"], failed["dead"], failed["retry_in"]) == (HANDLER_ERROR, True, None)
    assert dead == dict(failed, kind="dead")
    assert {call["thread"] for call in seen} == {"prefork-hooks"}   # not the worker's thread
    # Each hook ran once its outcome was committed: another connection reads it.
    assert [call["status_seen"] for call in seen] == ["done", "ready", "dead", "dead"]
    names = [e["event"] for e in sup.events()]
    assert_never_logged(names, "hook_failed")
    assert_never_logged(names, "hook_timed_out")


@pytest.mark.parametrize("mode", ["raise", "hang", "sys_exit", "system_exit"])
def test_a_hook_that_raises_hangs_or_ends_its_thread_changes_nothing(supervisor, backend_store,
                                                                      db, tmp_path, mode):
    record = tmp_path / "hooks.jsonl"
    store = backend_store()
    payload = {"record": str(record), "hook": mode}
    done_id = store.enqueue(new_job("hooks.ok", payload))
    dead_id = store.enqueue(new_job("hooks.fail", payload, max_attempts=2))
    # A hook that hangs is given up after 4 s: longer than the job's hard timeout, which
    # would kill the worker should the hook's time count as the job's.
    bounds = ("--hook-timeout", "4", "--hard-timeout", "3") if mode == "hang" else ()
    sup = supervisor(*bounds)
    done_row = wait_status(db, done_id, "done")
    dead_row = wait_status(db, dead_id, "dead")
    # The worker goes on: a job enqueued after them runs too.
    next_id = store.enqueue(new_job("hooks.ok", {"record": str(record)}))
    wait_status(db, next_id, "done")
    assert (done_row["attempts"], done_row["last_error"]) == (1, None)
    assert (dead_row["attempts"], dead_row["last_error"]) == (2, HANDLER_ERROR)
    # Every hook was called; a hung on_failure hook leaves its attempt's on_dead unrun.
    expected = [("success", done_id, 1), ("failure", dead_id, 1), ("failure", dead_id, 2),
                ("dead", dead_id, 2), ("success", next_id, 1)]
    if mode == "hang":
        expected.remove(("dead", dead_id, 2))
    wait_until(lambda: len(records(record)) >= len(expected), timeout=30,
               message="every hook call")   # the last one runs after its job is done
    assert [(call["kind"], call["job_id"], call["number"]) for call in records(record)] == \
        expected
    if mode == "hang":
        timed_out = sup.wait_event("hook_timed_out", count=3)
        assert [(e["job_id"], e["outcome"], e["hook"]) for e in timed_out] == [
            (done_id, "done", "hooks_app.after_success"),
            (dead_id, "retry", "hooks_app.after_failure"),
            (dead_id, "dead", "hooks_app.after_failure")]
        assert_never_logged([e["event"] for e in sup.events()], "hook_failed")
    else:
        failed = sup.wait_event("hook_failed", count=4)
        assert {(e["hook"], e["job_id"], e["error"]) for e in failed} == {
            (f"hooks_app.after_{kind}", job_id, HOOK_ERRORS[mode])
            for kind, job_id, _ in expected[:4]}
        assert all(e["traceback"].startswith("Traceback") for e in failed)
        assert_never_logged([e["event"] for e in sup.events()], "hook_timed_out")
    # The worker's bookkeeping: one worker all along, and the parent's count of done and
    # dead jobs as the jobs ended, after a graceful stop.
    sup.stop()
    names = [e["event"] for e in sup.events()]
    assert names.count("worker_spawned") == 1
    assert_never_logged(names, "worker_fatal")
    assert [e["processed"] for e in sup.events("worker_stopped")] == [4]
    assert [(e["reason"], e["status"]) for e in sup.events("worker_exited")] == \
        [("shutdown", "exit code 0")]
    assert [(e["done"], e["dead"]) for e in sup.events("supervisor_stopped")] == [(2, 1)]


def test_hooks_run_in_a_worker_forked_per_job(supervisor, backend_store, db, tmp_path):
    """--max-items 1: the child writes the completion itself when a success hook waits
    for it, and tells the parent the job ended before its hooks run."""
    record = tmp_path / "hooks.jsonl"
    store = backend_store()
    done_id = store.enqueue(new_job("hooks.ok", {"record": str(record), "hook": "hang"}))
    dead_id = store.enqueue(new_job("hooks.fail", {"record": str(record), "hook": "raise"},
                                    max_attempts=1))
    sup = supervisor("--max-items", "1", "--hook-timeout", "4", "--hard-timeout", "3")
    assert wait_status(db, done_id, "done")["attempts"] == 1
    assert wait_status(db, dead_id, "dead")["last_error"] == \
        "ValueError: handler failed on attempt 1"
    wait_until(lambda: len(records(record)) == 3, timeout=30, message="3 hook calls")
    assert sorted((call["kind"], call["job_id"]) for call in records(record)) == sorted(
        [("success", done_id), ("failure", dead_id), ("dead", dead_id)])
    sup.wait_event("hook_timed_out", job_id=done_id)
    sup.wait_event("hook_failed", count=2, job_id=dead_id)
    sup.stop()
    assert_never_logged([e["event"] for e in sup.events()], "job_handed_back")
    assert [(e["done"], e["dead"]) for e in sup.events("supervisor_stopped")] == [(1, 1)]
