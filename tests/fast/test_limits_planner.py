"""The limited claim's plan and the limit rules alone: no process, no database.
Property tests (hypothesis) check the limits hold for any mix of groups."""
from datetime import datetime, timedelta

import pytest
from hypothesis import given, strategies as st

from prefork.errors import UserError
from prefork.limits.planner import FIRST_TOKENS, Bucket, Waiting, plan, refilled
from prefork.limits.rules import Group, LimitRule, Rate, parse_rate, rule_for

NOW = datetime(2026, 12, 1, 12, 0, 0)


def fresh():
    return Bucket(FIRST_TOKENS, NOW)


def test_rates_read_per_second_minute_and_hour():
    assert parse_rate("100/m") == Rate(100, 60)
    assert parse_rate("20/s").per_second == 20
    assert str(parse_rate("7/h")) == "7/h"


@pytest.mark.parametrize("text", ["", "0/s", "-1/s", "10/d", "10/ m", "1e3/s", "10", 10, None,
                                  "10/s\n", "1234567890/s"])
def test_a_bad_rate_is_a_one_line_user_error(text):
    with pytest.raises(UserError, match="invalid rate"):
        parse_rate(text)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2", 1_000_001])
def test_a_bad_concurrency_is_a_one_line_user_error(value):
    with pytest.raises(UserError, match="invalid concurrency"):
        rule_for("t", concurrency=value)


def test_no_declared_limit_is_no_rule():
    assert rule_for("t") is None
    assert rule_for("t", concurrency=2, rate="5/s") == LimitRule("t", 2, Rate(5, 1))


def test_a_full_group_starts_nothing_and_others_keep_starting():
    rules = {"report": LimitRule("report", concurrency=1)}
    busy, free = Group("report", "acct-1"), Group("report", "acct-2")
    waiting = [Waiting(1, busy), Waiting(2, busy), Waiting(3, free), Waiting(4, free)]
    result = plan(waiting, rules, {busy: fresh(), free: fresh()}, {busy: 1}, NOW, limit=10)
    assert result.job_ids == [3]
    assert result.retry_after is None   # waits on concurrency, not on a rate


def test_only_groups_whose_lock_the_claim_holds_start_jobs():
    rules = {"report": LimitRule("report", concurrency=5)}
    mine, theirs = Group("report", "a"), Group("report", "b")
    waiting = [Waiting(1, theirs), Waiting(2, mine)]
    assert plan(waiting, rules, {mine: fresh()}, {}, NOW, limit=10).job_ids == [2]


def test_a_type_the_claimer_knows_no_rule_for_waits_for_one_that_does():
    # A reload (or another application) declared the limit; this claimer's code predates it.
    group = Group("new.limit", "")
    waiting = [Waiting(job_id, group) for job_id in range(1, 6)]
    result = plan(waiting, {}, {group: fresh()}, {}, NOW, limit=3)
    assert result.job_ids == [] and result.retry_after is None


def test_a_rate_spends_whole_tokens_and_says_when_the_next_comes():
    rules = {"api": LimitRule("api", rate=Rate(2, 1))}
    group = Group("api", "")
    bucket = Bucket(1.0, NOW - timedelta(seconds=0.25))    # 1.5 tokens by NOW
    result = plan([Waiting(1, group), Waiting(2, group)], rules, {group: bucket}, {}, NOW, 10)
    assert result.job_ids == [1]
    assert result.buckets[group] == Bucket(0.5, NOW)
    assert result.retry_after == pytest.approx(0.25)


def test_a_bucket_holds_at_most_one_period_of_starts():
    rule = LimitRule("api", rate=Rate(10, 60))
    assert refilled(Bucket(0.0, NOW - timedelta(days=1)), rule, NOW) == 10.0
    assert refilled(Bucket(3.0, NOW + timedelta(seconds=5)), rule, NOW) == 3.0   # clock stepped back


groups = st.sampled_from([Group("a", ""), Group("a", "k"), Group("b", ""), Group("c", "x")])


@given(waiting_groups=st.lists(groups, max_size=40),
       running=st.dictionaries(groups, st.integers(0, 4)),
       tokens=st.dictionaries(groups, st.floats(0, 5)),
       limit=st.integers(1, 32))
def test_no_plan_exceeds_a_concurrency_limit_a_bucket_or_the_batch(waiting_groups, running,
                                                                   tokens, limit):
    rules = {"a": LimitRule("a", concurrency=2), "b": LimitRule("b", rate=Rate(3, 1)),
             "c": LimitRule("c", concurrency=3, rate=Rate(1, 60))}
    waiting = [Waiting(job_id, group) for job_id, group in enumerate(waiting_groups, 1)]
    locked = {group: Bucket(tokens.get(group, 1.0), NOW) for group in set(waiting_groups)}
    result = plan(waiting, rules, locked, running, NOW, limit)
    assert len(result.job_ids) <= limit
    assert result.job_ids == sorted(result.job_ids)   # claim order kept
    started = {group: sum(1 for job in waiting if job.group == group and
                          job.job_id in result.job_ids) for group in locked}
    for group, count in started.items():
        rule = rules[group.job_type]
        if rule.concurrency is not None:
            assert running.get(group, 0) + count <= max(rule.concurrency, running.get(group, 0))
        if rule.rate is not None:
            assert count <= int(locked[group].tokens)
            if count:
                assert result.buckets[group].tokens >= 0
