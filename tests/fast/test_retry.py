"""The retry policy: how long a failed job waits, and when it is dead instead."""
import random

import pytest

from prefork.jobs import JobStatus
from prefork.retry import Decision, RetryPolicy, hand_back_decision


@pytest.fixture
def jitter(monkeypatch):
    """Sets the jitter factor random.uniform returns, and records the range asked for."""
    asked = []

    def set_factor(factor):
        def uniform(low, high):
            asked.append((low, high))
            return factor
        monkeypatch.setattr(random, "uniform", uniform)
        return asked
    return set_factor


def test_the_delay_doubles_with_each_attempt_from_the_base(jitter):
    jitter(1.0)
    policy = RetryPolicy(base=2.0, cap=1000.0)
    assert [policy.backoff(attempt) for attempt in (1, 2, 3, 4, 5)] == [2, 4, 8, 16, 32]


def test_the_delay_never_exceeds_the_cap(jitter):
    jitter(1.0)
    policy = RetryPolicy(base=1.0, cap=60.0)
    assert [policy.backoff(attempt) for attempt in (6, 7, 8, 100, 5000)] == [32, 60, 60, 60, 60]


def test_jitter_only_shortens_the_delay_by_up_to_a_quarter(jitter):
    asked = jitter(0.75)
    policy = RetryPolicy(base=1.0, cap=60.0)
    assert (policy.backoff(3), policy.backoff(50)) == (3.0, 45.0)
    assert set(asked) == {(0.75, 1.0)}


def test_real_jitter_spreads_jobs_that_failed_together_within_its_bounds():
    policy = RetryPolicy(base=4.0, cap=3600.0)
    delays = {policy.backoff(3) for _ in range(200)}
    assert all(12.0 <= delay <= 16.0 for delay in delays)
    assert len(delays) > 100


def test_a_first_attempt_numbered_zero_waits_the_base(jitter):
    jitter(1.0)
    assert RetryPolicy(base=1.5).backoff(0) == 1.5


def test_a_failed_attempt_is_retried_until_the_last_one(jitter):
    jitter(1.0)
    policy = RetryPolicy(base=1.0, cap=3600.0)
    assert policy.decide(1, 3) == Decision(dead=False, delay=1.0)
    assert policy.decide(2, 3) == Decision(dead=False, delay=2.0)
    assert policy.decide(3, 3) == Decision(dead=True, delay=0.0)
    assert policy.decide(4, 3) == Decision(dead=True, delay=0.0)   # already past it


def test_a_permanent_failure_is_dead_at_its_first_attempt():
    assert RetryPolicy().decide(1, 5, permanent=True) == Decision(dead=True, delay=0.0)


# -- the job of a worker that died ---------------------------------------------------

def test_a_worker_stopped_on_purpose_hands_its_job_back_uncharged():
    assert hand_back_decision(attempts=5, max_attempts=5, crashes=2, cause="SIGTERM",
                              policy=RetryPolicy(), max_crashes=3, charge=False) == (
        JobStatus.READY, 0.0, "worker stopped: SIGTERM")


def test_a_crash_is_retried_with_backoff(jitter):
    jitter(1.0)
    assert hand_back_decision(attempts=2, max_attempts=5, crashes=0, cause="SIGKILL",
                              policy=RetryPolicy(base=3.0), max_crashes=3, charge=True) == (
        JobStatus.READY, 6.0, "worker died: SIGKILL")


def test_a_crash_at_the_last_attempt_is_dead():
    assert hand_back_decision(attempts=5, max_attempts=5, crashes=0, cause="SIGKILL",
                              policy=RetryPolicy(), max_crashes=3, charge=True) == (
        JobStatus.DEAD, 0.0, "worker died: SIGKILL")


def test_a_job_that_keeps_crashing_its_worker_is_poison():
    assert hand_back_decision(attempts=1, max_attempts=50, crashes=2, cause="SIGSEGV",
                              policy=RetryPolicy(), max_crashes=3, charge=True) == (
        JobStatus.DEAD, 0.0, "crashed its worker 3 times: SIGSEGV")


def test_statuses_read_as_their_words():
    assert [str(status) for status in JobStatus] == ["ready", "reserved", "done", "dead",
                                                    "cancelled", "waiting"]
    assert JobStatus.DEAD == "dead" and f"{JobStatus.READY}" == "ready"
