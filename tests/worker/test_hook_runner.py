"""The worker's hook runner in this process, with real threads: hooks that hang pile up
no more than MAX_HUNG threads (the next attempts' hooks are skipped and logged), and
once they return the hooks run again. What a hook sees is a copy: changing it changes
nothing of the job."""
import threading

import pytest
from conftest import wait_until

from prefork.failures import ErrorWriter
from prefork.jobs import Job, Outcome
from prefork.worker import hooks
from prefork.worker.attempt import JobAttempt


def claimed(job_id, payload_text='{"items": [1, 2]}'):
    return Job(id=job_id, type="report.build", queue="reports", payload_text=payload_text,
               attempt=2, max_attempts=5, idempotency_key="k", lease_token="secret-token")


def named(records, name):
    return [record.prefork_fields for record in records if record.getMessage() == name]


def test_hung_hooks_are_bounded_and_later_attempts_skipped_until_they_return(logged,
                                                                             monkeypatch):
    monkeypatch.setattr(hooks, "MAX_HUNG", 2)
    release = threading.Event()
    seen = []

    def hook(attempt):
        seen.append(attempt.job_id)
        release.wait()

    # 2 s: ample time for a hook's thread to start the hook it is given.
    runner = hooks.HookRunner(2, ErrorWriter(), lambda outcome: [hook])
    for job_id in range(1, 5):
        runner.run(claimed(job_id), Outcome.DONE)
    assert seen == [1, 2]
    assert [fields["job_id"] for fields in named(logged, "hook_timed_out")] == [1, 2]
    skipped = named(logged, "hook_skipped")
    assert [(fields["job_id"], fields["hooks_running"]) for fields in skipped] == [(3, 2), (4, 2)]
    release.set()   # the hung hooks return, their threads end: hooks run again
    wait_until(lambda: not any(thread.alive() for thread in runner.hung), timeout=30)
    runner.run(claimed(99), Outcome.DONE)
    assert seen[-1] == 99 and len(named(logged, "hook_skipped")) == 2


def test_a_failure_is_seen_with_its_outcome_and_a_payload_copy(logged):
    seen = []
    reported = (Outcome.DONE, Outcome.RETRY, Outcome.DEAD)   # as registry.hooks_for
    runner = hooks.HookRunner(30, ErrorWriter(),
                              lambda outcome: [seen.append] if outcome in reported else [])
    job = claimed(7)
    error = ValueError("no")
    runner.failed(job, error, "ValueError: no", 1.5)
    runner.run(job, Outcome.RETRY)
    runner.failed(job, error, "ValueError: no", 3.0)
    runner.run(job, Outcome.DEAD)
    runner.failed(job, error, "ValueError: no", 3.0)
    runner.run(job, Outcome.LOST)   # another worker owns the job: nothing to report
    runner.run(job, Outcome.DONE)   # (as if it ran again): the lost failure is forgotten
    retried, dead, done = seen
    assert (retried.outcome, retried.retry_in, retried.dead, retried.exception) == \
        (Outcome.RETRY, 1.5, False, error)
    assert (dead.outcome, dead.retry_in, dead.dead, dead.error) == \
        (Outcome.DEAD, None, True, "ValueError: no")
    assert (done.outcome, done.exception, done.error) == (Outcome.DONE, None, None)
    assert (dead.job_id, dead.type, dead.queue, dead.number, dead.max_attempts, dead.key) == \
        (7, "report.build", "reports", 2, 5, "k")
    copy = dead.payload()
    copy["items"].append(3)
    assert dead.payload() == {"items": [1, 2]} and job.payload_text == '{"items": [1, 2]}'
    assert "secret-token" not in repr(dead) and "items" not in repr(dead)
    with pytest.raises(AttributeError):
        dead.job_id = 8
    assert JobAttempt.of(claimed(8, "not json"), Outcome.DEAD).payload() is None
    assert not named(logged, "hook_failed")
