"""Handlers and hooks for tests/worker/test_hooks.py: each hook writes what it saw (and
the job's status in the database as it runs) to the file payload['record'] names, then
misbehaves as payload['hook'] says."""
import json
import sys
import threading

import prefork
from prefork.config import load
from prefork.store import open_store

HOOK_ERROR = "hook boom"


@prefork.handler("hooks.ok")
def ok(job):
    return None


@prefork.handler("hooks.fail", backoff=0)
def fail(job):
    raise ValueError(f"handler failed on attempt {job.attempt}")


def misbehave(kind, attempt):
    spec = attempt.payload() or {}
    with open(spec["record"], "a") as record:
        record.write(json.dumps({
            "kind": kind, "job_id": attempt.job_id, "type": attempt.type,
            "queue": attempt.queue, "number": attempt.number, "outcome": attempt.outcome,
            "max_attempts": attempt.max_attempts, "key": attempt.key, "dead": attempt.dead,
            "error": attempt.error, "retry_in": attempt.retry_in,
            "exception": repr(attempt.exception) if attempt.exception else None,
            "thread": threading.current_thread().name,
            "status_seen": status(attempt.job_id)}) + "\n")
    mode = spec.get("hook")
    if mode == "raise":
        raise RuntimeError(HOOK_ERROR)
    if mode == "hang":
        threading.Event().wait()   # forever
    if mode == "sys_exit":
        sys.exit(3)
    if mode == "system_exit":
        raise SystemExit


def status(job_id):
    """The job's status as the database has it now (its own connection: the store's)."""
    store = open_store(load())
    try:
        return store.get(job_id)["status"]
    finally:
        store.close()


@prefork.on_success
def after_success(attempt):
    misbehave("success", attempt)


@prefork.on_failure
def after_failure(attempt):
    misbehave("failure", attempt)


@prefork.on_dead
def after_dead(attempt):
    misbehave("dead", attempt)
