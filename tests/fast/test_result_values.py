"""What a job keeps of an attempt, as pure functions: a result's JSON and its bounds
(prefork/results.py), a failure's class path and traceback (prefork/failures.py),
and the one way times are shown (prefork/times.py)."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from prefork.failures import (CLASS_PATH_LENGTH, CUT, TRACEBACK_CHARS, ErrorDetail, ErrorWriter,
                              class_path, failed_attempt, kept_traceback)
from prefork.jobs import Job, JobRun
from prefork.results import ResultRefused, encoded, kept
from prefork.times import utc_iso


def a_job(result, ttl=60.0, max_bytes=100):
    job = Job(id=7, type="t", queue="default", payload_text="{}", attempt=2, max_attempts=5,
              idempotency_key=None, lease_token="tok")
    job.result = result
    job.run = JobRun("host:1", datetime(2026, 12, 4, 3, 28, 24), ttl, max_bytes)
    return job


def test_a_result_is_kept_as_compact_json_with_its_lease_and_run():
    result = kept(a_job({"answer": 42, "list": (1, "é")}))
    assert json.loads(result.value) == {"answer": 42, "list": [1, "é"]}
    assert result.value == '{"answer":42,"list":[1,"é"]}'
    assert (result.lease, result.worker, result.ttl) == ((7, "tok"), "host:1", 60.0)
    assert result.started_at == datetime(2026, 12, 4, 3, 28, 24)


def test_nothing_is_kept_for_none_or_a_zero_ttl():
    assert kept(a_job(None)) is None
    assert kept(a_job({"answer": 42}, ttl=0)) is None


@pytest.mark.parametrize("value, error", [
    (object(), "return value is not JSON: TypeError"),
    ({"when": datetime(2026, 1, 1)}, "return value is not JSON: TypeError"),
    (float("nan"), "return value is not JSON: ValueError"),
    ("\udc80", "return value is not valid Unicode text (a lone surrogate)"),
    ("é" * 60, "return value is 122 bytes, over the limit of 100 (max_result_bytes)"),
])
def test_a_result_that_cannot_be_kept_is_refused_in_one_line(value, error):
    with pytest.raises(ResultRefused) as refused:
        kept(a_job(value))
    assert str(refused.value) == error


def test_a_result_nested_past_the_interpreters_stack_is_refused():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ResultRefused, match="nested too deep"):
        encoded(deep, 10 ** 9)


def test_a_failure_keeps_its_class_path_and_the_end_of_its_traceback():
    try:
        raise ValueError("card 4111 declined")
    except ValueError as exc:
        caught = exc
    writer = ErrorWriter(ErrorDetail.MESSAGE)
    failure = failed_attempt(caught, writer.traceback(caught))
    assert failure.class_path == "builtins.ValueError"
    assert failure.traceback.endswith("ValueError: card 4111 declined")
    classed = ErrorWriter(ErrorDetail.CLASS).traceback(caught)
    assert classed.endswith("\nValueError") and "4111" not in classed
    long = "x" * (TRACEBACK_CHARS + 50) + "END"
    cut = kept_traceback(long)
    assert len(cut) == TRACEBACK_CHARS and cut.startswith(CUT) and cut.endswith("END")
    assert kept_traceback("\udc80 tail") == "\\udc80 tail"


def test_a_class_path_is_cut_to_its_columns_width():
    named = type("E" * 400, (Exception,), {})
    assert len(class_path(named())) == CLASS_PATH_LENGTH


def test_every_time_is_shown_as_iso_8601_utc_with_milliseconds_and_its_zone():
    assert utc_iso(datetime(2026, 12, 4, 3, 28, 24, 969044)) == "2026-12-04T03:28:24.969+00:00"
    paris = timezone(timedelta(hours=1))
    assert utc_iso(datetime(2026, 12, 4, 4, 28, 24, tzinfo=paris)) == \
        "2026-12-04T03:28:24.000+00:00"
