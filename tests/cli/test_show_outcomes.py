"""Reading a failure (issue 28, items 1 and 4) through the real CLI on both backends:
`show --traceback` prints the tracebacks a job keeps of its last failed attempts
(credentials masked; frames and class only under error_detail = class), `show`
says the attempts limit that applied (a handler's own cap) and every time in one
format, ISO 8601 in UTC with its zone."""
import json
import re
import uuid

import pytest
from cli_checks import assert_refused
from conftest import run_cli

from prefork.failures import TRACEBACKS_KEPT
from prefork.jobs import new_job

WORK = ("work", "--app", "results_app", "--stop-when-empty")
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


@pytest.fixture
def queue(backend_store, queue_dsn):
    return queue_dsn, backend_store()


def show(dsn, *args, **env):
    result = run_cli("show", *map(str, args), dsn=dsn, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def split_show(text):
    """(the job's JSON, [(header line, traceback text)]) of `show --traceback`'s output."""
    shown, *kept = text.split("\n--- attempt ")
    return json.loads(shown), [tuple(part.split("\n", 1)) for part in kept]


def test_show_traceback_prints_the_last_failed_attempts_masked(queue):
    dsn, store = queue
    secret = f"pw-{uuid.uuid4().hex}"
    env = {"RESULTS_APP_SECRET": secret}   # in a URL: masked whatever the DB password
    job_id = store.enqueue(new_job("results.failing", max_attempts=5))
    work = run_cli(*WORK, dsn=dsn, **env)
    assert work.returncode == 0, work.stderr

    out = show(dsn, job_id, "--traceback", **env)
    assert secret not in out
    job, kept = split_show(out)
    assert (job["status"], job["attempts"]) == ("dead", 5)
    assert len(kept) == TRACEBACKS_KEPT   # the last ones: attempts 3, 4 and 5
    for (header, text), attempt in zip(kept, range(5 - TRACEBACKS_KEPT + 1, 6)):
        assert re.fullmatch(rf"{attempt}, failed at {ISO_UTC.pattern} on \S+:\d+ ---", header)
        lines = text.splitlines()
        assert lines[0] == "KeyError: 'inner cause'"   # the chained cause, as the log has it
        assert "Traceback (most recent call last):" in lines
        assert lines[-1] == f"ConnectionError: attempt {attempt}: mysql://app:***@db/x refused"
        assert any(line.rstrip().endswith(", in failing") for line in lines)
    assert "--- attempt" not in show(dsn, job_id)   # only when asked


def test_under_error_detail_class_a_kept_traceback_has_frames_and_no_message(queue):
    dsn, store = queue
    job_id = store.enqueue(new_job("results.failing", max_attempts=1))
    work = run_cli(*WORK, "--error-detail", "class", dsn=dsn)
    assert work.returncode == 0, work.stderr
    job, [(header, text)] = split_show(show(dsn, job_id, "--traceback"))
    assert job["last_error"] == "ConnectionError"
    assert text.splitlines()[-1] == "ConnectionError"
    assert ", in failing" in text and "refused" not in text and "inner cause" not in text
    assert "fail(job)" not in text   # no source line either


def test_show_says_the_attempts_limit_that_applied_and_times_in_one_format(queue):
    dsn, store = queue
    capped = store.enqueue(new_job("results.capped", max_attempts=5))
    delayed = store.enqueue(new_job("results.answer", delay=3600))
    work = run_cli(*WORK, dsn=dsn)
    assert work.returncode == 0, work.stderr
    job = json.loads(show(dsn, capped))
    assert (job["status"], job["attempts"], job["max_attempts"]) == ("dead", 3, 3)
    times = [job[name] for name in ("created_at", "updated_at", "finished_at", "available_at")]
    times += [entry["at"] for entry in job["error_history"]]
    assert len(times) == 4 + 3 and all(ISO_UTC.fullmatch(moment) for moment in times), times
    listed = run_cli("failed", dsn=dsn).stdout.splitlines()
    assert ISO_UTC.fullmatch(listed[1].split()[-1]) and job["finished_at"] in listed[1]
    waiting = json.loads(show(dsn, delayed))
    assert ISO_UTC.fullmatch(waiting["available_at"])
    assert ISO_UTC.fullmatch(waiting["waiting"].removeprefix("delayed until "))


def test_show_traceback_of_a_job_that_never_failed_says_so(queue):
    dsn, store = queue
    job_id = store.enqueue(new_job("results.answer"))
    out = show(dsn, job_id, "--traceback")
    assert out.rstrip().endswith("(no traceback kept: no attempt of this job failed in its "
                                 "handler)")
    assert_refused(run_cli("show", "--traceback", dsn=dsn), "the following arguments are "
                   "required: ID")
