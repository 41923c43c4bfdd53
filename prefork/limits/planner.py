"""The limited claim's plan, as a function of plain values: which of the waiting
limited jobs may start now, and what each group's token bucket holds after.

Every dialect's store gathers the facts in its claim transaction (the published
rules, the due limited jobs in claim order, the groups it locked, their reserved
jobs, their buckets, the database's clock) and carries out the answer. Nothing here
queries; tests/fast/test_limits_planner.py checks the rules alone.

A slot is a reserved job: `running` is counted from the job table under the
group's lock, so a slot frees itself whenever its job leaves `reserved`, by
whatever path (done, failed, cancelled, handed back, lease expired).

A rate is a token bucket per group: it holds at most one period's starts
(`count`), refills at count/seconds per second, and a new group starts with
one token, so a group's first job never waits and a rate of 20/s held for 10 s
starts 201 jobs, not 220.
"""
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from .rules import Group, LimitRule

FIRST_TOKENS = 1.0


class Waiting(NamedTuple):
    """A due limited job, as the store read it (in claim order)."""
    job_id: int
    group: Group


class Bucket(NamedTuple):
    """A group's token bucket as stored: tokens left at `refilled_at` (database clock)."""
    tokens: float
    refilled_at: datetime


class Plan(NamedTuple):
    job_ids: list[int]                 # to reserve, in claim order
    buckets: dict[Group, Bucket]       # the new state of each bucket a start used
    retry_after: float | None          # seconds until a rate-starved group gets a token


def refilled(bucket: Bucket, rule: LimitRule, now: datetime) -> float:
    """The tokens in a bucket at `now` (never more than one period's starts)."""
    assert rule.rate is not None
    elapsed = max(0.0, (now - bucket.refilled_at).total_seconds())
    return min(float(rule.rate.count), bucket.tokens + elapsed * rule.rate.per_second)


def plan(waiting: Sequence[Waiting], rules: Mapping[str, LimitRule],
         locked: Mapping[Group, Bucket], running: Mapping[Group, int],
         now: datetime, limit: int) -> Plan:
    """Up to `limit` of the waiting jobs, in order, that their groups have room for.

    Only groups in `locked` (whose row this claim holds) may start jobs. `rules`
    are the published rules of the types the claimer declares limits for: a job
    of another type is held back (another application's, whose handlers the
    claimer may not have), and left to claimers that declare it. (When a limit is
    removed, publish_limits() clears `limited`, and the plain claim takes those
    jobs.)
    """
    room: dict[Group, float] = {}
    for group, bucket in locked.items():
        room[group] = _room(group, bucket, rules.get(group.job_type), running.get(group, 0), now)
    chosen: list[int] = []
    started: dict[Group, int] = {}
    for job in waiting:
        if len(chosen) >= limit:
            break
        if job.group in room and started.get(job.group, 0) + 1 <= room[job.group]:
            chosen.append(job.job_id)
            started[job.group] = started.get(job.group, 0) + 1
    spent = _spent(started, locked, rules, now)
    chosen_ids = set(chosen)
    left = {job.group for job in waiting if job.job_id not in chosen_ids}
    return Plan(chosen, spent, _retry_after(left, {**locked, **spent}, rules, running,
                                            started, now))


def _room(group: Group, bucket: Bucket, rule: LimitRule | None, running: int,
          now: datetime) -> float:
    """How many more jobs of the group may start now."""
    if rule is None:
        return 0
    room = float("inf")
    if rule.concurrency is not None:
        room = max(0, rule.concurrency - running)
    if rule.rate is not None:
        room = min(room, int(refilled(bucket, rule, now)))
    return room


def _spent(started: Mapping[Group, int], locked: Mapping[Group, Bucket],
           rules: Mapping[str, LimitRule], now: datetime) -> dict[Group, Bucket]:
    """The buckets after the starts: refilled to now, less one token per start."""
    spent = {}
    for group, count in started.items():
        rule = rules.get(group.job_type)
        if rule is not None and rule.rate is not None:
            spent[group] = Bucket(refilled(locked[group], rule, now) - count, now)
    return spent


def _retry_after(left: set[Group], buckets: Mapping[Group, Bucket],
                 rules: Mapping[str, LimitRule], running: Mapping[Group, int],
                 started: Mapping[Group, int], now: datetime) -> float | None:
    """Seconds until the soonest next token of a group that has jobs left waiting,
    room for them by concurrency, and an empty bucket; None when no group waits
    on its rate alone."""
    soonest: float | None = None
    for group in left & set(buckets):
        rule = rules.get(group.job_type)
        if rule is None or rule.rate is None:
            continue
        busy = running.get(group, 0) + started.get(group, 0)
        if rule.concurrency is not None and busy >= rule.concurrency:
            continue
        missing = 1.0 - refilled(buckets[group], rule, now)
        wait = max(0.0, missing) / rule.rate.per_second
        soonest = wait if soonest is None else min(soonest, wait)
    return soonest
