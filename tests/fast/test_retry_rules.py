"""A job type's own retry rules (@prefork.handler(retry_on=, discard_on=, max_attempts=,
backoff=)): which failures retry, which are dead at once, how long a retry waits, and
the one-line refusals of wrong arguments at decoration time."""
import dataclasses
import math

import pytest

import prefork
from prefork import registry
from prefork.errors import JobTimeout, PermanentError, RejectedJob
from prefork.jobs import MAX_DELAY
from prefork.retry import Decision, RetryPolicy, RetryRules

POLICY = RetryPolicy(base=1.0, cap=8.0)
DEAD = Decision(dead=True, delay=0.0)


def decide(rules, exc, attempt=1, max_attempts=5):
    """The decision, without the limit it carries (test_the_decision_carries_the_limit...)."""
    decision = rules.decide(exc, attempt, max_attempts, POLICY)
    return dataclasses.replace(decision, max_attempts=None)


def test_without_rules_every_failure_retries_until_its_attempts_run_out():
    rules = RetryRules()
    retried = decide(rules, ValueError("x"))
    assert not retried.dead and 0.75 <= retried.delay <= 1.0   # the configured backoff
    assert decide(rules, ValueError("x"), attempt=5) == DEAD
    assert decide(rules, PermanentError("x")) == DEAD
    assert decide(rules, RejectedJob("unknown job type")) == DEAD


def test_discard_on_is_dead_at_once_subclasses_included():
    rules = RetryRules.checked(discard_on=(LookupError,))
    assert decide(rules, KeyError("customer")) == DEAD
    assert not decide(rules, TimeoutError()).dead


def test_retry_on_retries_only_its_classes_and_anything_else_is_dead_at_once():
    rules = RetryRules.checked(retry_on=(TimeoutError, ConnectionError))
    assert not decide(rules, ConnectionResetError()).dead   # a subclass retries
    assert not decide(rules, TimeoutError()).dead
    assert decide(rules, ValueError("bad input")) == DEAD
    assert decide(rules, JobTimeout("soft timeout after 2s")) == DEAD   # not a TimeoutError
    assert decide(rules, TimeoutError(), attempt=5) == DEAD   # still bounded by attempts


def test_discard_on_wins_over_retry_on_and_permanent_error_always_wins():
    rules = RetryRules.checked(retry_on=OSError, discard_on=FileNotFoundError)
    assert decide(rules, FileNotFoundError()) == DEAD
    assert not decide(rules, PermissionError()).dead
    everything = RetryRules.checked(retry_on=Exception)
    assert decide(everything, PermanentError("card declined")) == DEAD


def test_the_decision_carries_the_limit_that_applies_for_the_row():
    capped = RetryRules.checked(max_attempts=3)
    assert capped.decide(ValueError(), 1, 5, POLICY).max_attempts == 3
    assert capped.decide(ValueError(), 1, 2, POLICY).max_attempts == 2   # the job's is lower
    assert RetryRules().decide(ValueError(), 5, 5, POLICY).max_attempts == 5


def test_max_attempts_caps_the_jobs_own():
    rules = RetryRules.checked(max_attempts=2)
    assert not decide(rules, ValueError(), attempt=1, max_attempts=5).dead
    assert decide(rules, ValueError(), attempt=2, max_attempts=5) == DEAD
    assert decide(rules, ValueError(), attempt=1, max_attempts=1) == DEAD   # the job's is lower


@pytest.mark.parametrize("backoff, attempt, expected", [
    (30, 1, 30.0), (0, 3, 0.0), (2.5, 9, 2.5),                 # a constant, no jitter
    (lambda n: 10 * n, 3, 30.0),                                # a function of the attempt
    (lambda n: 10.0 ** 12, 1, float(MAX_DELAY)),                # bounded like any delay
])
def test_a_handlers_backoff_replaces_the_configured_one(backoff, attempt, expected):
    rules = RetryRules.checked(backoff=backoff)
    assert decide(rules, ValueError(), attempt=attempt, max_attempts=10) == \
        Decision(dead=False, delay=expected)


@pytest.mark.parametrize("broken", [
    lambda n: 1 / 0, lambda n: "soon", lambda n: -5, lambda n: math.nan, lambda n: True,
])
def test_a_backoff_function_that_fails_falls_back_to_the_configured_backoff(broken):
    decision = decide(RetryRules.checked(backoff=broken), ValueError(), attempt=2)
    assert not decision.dead and 1.5 <= decision.delay <= 2.0   # POLICY's 2 s, jittered


@pytest.mark.parametrize("arguments, error, words", [
    ({"retry_on": ValueError("x")}, TypeError, "retry_on must be exception classes"),
    ({"retry_on": (ValueError, "TimeoutError")}, TypeError, "retry_on must be"),
    ({"discard_on": int}, TypeError, "discard_on must be exception classes"),
    ({"discard_on": KeyboardInterrupt}, TypeError, "discard_on must be"),
    ({"retry_on": ValueError, "discard_on": (KeyError, ValueError)}, ValueError,
     "ValueError is in both retry_on and discard_on"),
    ({"max_attempts": 0}, ValueError, "max_attempts must be an integer from 1"),
    ({"max_attempts": 2.5}, ValueError, "max_attempts must be"),
    ({"max_attempts": True}, ValueError, "max_attempts must be"),
    ({"backoff": -1}, ValueError, "backoff must be seconds"),
    ({"backoff": math.inf}, ValueError, "backoff must be seconds"),
    ({"backoff": "5"}, ValueError, "backoff must be seconds"),
])
def test_wrong_arguments_are_refused_at_decoration_in_one_line(arguments, error, words):
    with pytest.raises(error) as refused:
        prefork.handler("test_retry_rules.wrong", **arguments)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert registry.lookup("test_retry_rules.wrong") is None   # nothing registered


def test_the_decorated_function_still_runs_and_the_registry_has_its_rules():
    @prefork.handler("test_retry_rules.sync", retry_on=(TimeoutError,), max_attempts=3,
                     backoff=lambda n: n)
    def sync(job):
        return ("synced", job)

    assert sync("a job") == ("synced", "a job")
    assert sync.__name__ == "sync" and callable(sync.enqueue)
    assert registry.lookup("test_retry_rules.sync")("job") == ("synced", "job")
    rules = registry.rules("test_retry_rules.sync")
    assert rules.retry_on == (TimeoutError,) and rules.max_attempts == 3
    assert registry.rules("test_retry_rules.no_such_type") == RetryRules()
