"""The SQLite store's limits: publishing the rules, the limited claim, and what
waits on them. A part of SQLiteStore; statements are named in limits_queries.py.

The limited claim is one BEGIN IMMEDIATE transaction: it holds the database's
one write lock from its first read, so the rules it enforces (the published
ones, prefork_limits, of the types the claimer handles), the slots it counts
(the groups' reserved jobs), the buckets it reads and the jobs it reserves are
what every other claimer sees after it. No row needs a lock of its own, so a group's row
(prefork_limit_groups) is read only for its bucket, when its type has a rate;
a group without one gets its row when it first starts a job (prune_processes()
removes the rows of groups long unused).
"""
import sqlite3
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from contextlib import closing
from datetime import datetime
from typing import Any

from ...jobs import Job, utc_now
from ...limits import planner
from ...limits.planner import Bucket, Waiting
from ...limits.published import log_replaced
from ...limits.rules import Group, LimitRule, LimitUsage, stored_rule
from .file import stamp, times
from .lifecycle import SQLiteLifeCycle
from .limits_queries import (
    BUCKET,
    ENSURE_BUCKET,
    FLAG_LIVE_JOBS,
    LIMIT_USAGE,
    LIMITED_CLAIM_ROW,
    LIMITED_WAITING,
    LIMITED_WAITING_OUTSIDE,
    PUBLISH_LIMIT,
    PUBLISHED_RULES,
    RULES_OF,
    RUNNING_PER_GROUP,
    SPEND_TOKENS,
    UNPUBLISH_LIMIT,
    group_placeholders,
)
from .queries import placeholders

WAITING_READ = 256   # due limited jobs read per queue and claim


class SQLiteLimits(SQLiteLifeCycle):
    def publish_limits(self, rules: Sequence[LimitRule], handled_types: Sequence[str]) -> None:
        ruled = {rule.job_type for rule in rules}
        with self._write() as cursor:
            published = {row[0]: stored_rule(*row)
                         for row in cursor.execute(PUBLISHED_RULES).fetchall()}
            now = stamp(utc_now())
            cursor.executemany(PUBLISH_LIMIT, [_rule_params(rule, now) for rule in rules])
            gone = sorted((set(handled_types) & published.keys()) - ruled)
            cursor.executemany(UNPUBLISH_LIMIT, [{"job_type": job_type} for job_type in gone])
            cursor.executemany(FLAG_LIVE_JOBS,
                               [{"job_type": job_type, "limited": 1}
                                for job_type in sorted(ruled - published.keys())] +
                               [{"job_type": job_type, "limited": 0} for job_type in gone])
        log_replaced(published, rules, gone)

    def claim_limited(self, queues: Sequence[str], worker: str, lease_seconds: float,
                      limit: int, process_id: int | None,
                      job_types: Collection[str]) -> tuple[list[Job], float | None]:
        with self._write() as cursor:
            now = utc_now()
            claim = _LimitedClaim(cursor, _published(cursor, job_types), now)
            for queue in dict.fromkeys(queues):   # a queue listed twice is read once
                if len(claim.chosen) >= limit:
                    break
                claim.plan_queue(queue, limit - len(claim.chosen))
            claim.save_buckets()
            rows = [cursor.execute(LIMITED_CLAIM_ROW, {"id": job_id}).fetchone()
                    for job_id in claim.chosen]
            jobs = self._reserve_rows(cursor, rows, (worker, process_id),
                                      times(now, lease_until=lease_seconds))
        return jobs, claim.retry_after

    def limited_ready(self, queues: Sequence[str], limit: int) -> int:
        return self._count_ready(queues, limit, limited=True)

    def limit_usage(self) -> list[LimitUsage]:
        with closing(self._read(LIMIT_USAGE, {"now": stamp(utc_now())})) as cursor:
            return [LimitUsage.of(stored_rule(job_type, *rule), key, int(running), int(waiting))
                    for job_type, key, running, waiting, *rule in cursor.fetchall()]


class _LimitedClaim:
    """One limited claim's facts, gathered queue by queue under the write lock: the
    groups' slots taken, their buckets, the jobs chosen so far."""

    def __init__(self, cursor: sqlite3.Cursor, rules: Mapping[str, LimitRule],
                 now: datetime) -> None:
        self.cursor, self.rules, self.now = cursor, rules, now
        self.running = _running(cursor, rules)
        self.buckets: dict[Group, Bucket] = {}
        self.spent: set[Group] = set()
        self.started: set[Group] = set()
        self.blocked: set[Group] = set()   # no room now: left out of a second read
        self.chosen: list[int] = []
        self.retry_after: float | None = None

    def plan_queue(self, queue: str, limit: int) -> None:
        """Choose up to `limit` waiting jobs of `queue` that their groups have room for.
        When a whole read had no room (its groups' rates spent), read once more without
        those groups: a spent key's backlog must not hide another key behind it."""
        waiting = self._waiting(queue)
        chosen = self._plan(waiting, limit)
        if not chosen and len(waiting) == WAITING_READ:
            self.blocked.update(job.group for job in waiting)
            self._plan(self._waiting(queue), limit)

    def _plan(self, waiting: list[Waiting], limit: int) -> list[int]:
        """Plan these waiting jobs and take what the plan chose; the ids chosen."""
        groups = {job.group: self._bucket(job.group) for job in waiting}
        decision = planner.plan(waiting, self.rules, groups, self.running, self.now, limit)
        chosen = set(decision.job_ids)
        started = [job.group for job in waiting if job.job_id in chosen]
        self.chosen += decision.job_ids
        self.running.update(started)
        self.started.update(started)
        self.buckets.update(decision.buckets)
        self.spent.update(decision.buckets)
        if decision.retry_after is not None and (self.retry_after is None or
                                                 decision.retry_after < self.retry_after):
            self.retry_after = decision.retry_after
        return decision.job_ids

    def save_buckets(self) -> None:
        """Write the buckets spent; make the row of a group without a rate that started."""
        now = stamp(self.now)
        self.cursor.executemany(ENSURE_BUCKET, [
            {"job_type": group.job_type, "key": group.key, "tokens": planner.FIRST_TOKENS,
             "now": now} for group in self.started - self.spent])
        self.cursor.executemany(SPEND_TOKENS, [
            {"job_type": group.job_type, "key": group.key, "tokens": self.buckets[group].tokens,
             "refilled_at": stamp(self.buckets[group].refilled_at)} for group in self.spent])

    def _waiting(self, queue: str) -> list[Waiting]:
        """The next due limited jobs of the queue, but those of groups already full."""
        params: dict[str, Any] = {"queue": queue, "now": stamp(self.now), "limit": WAITING_READ}
        full = sorted(self.blocked | {group for group, running in self.running.items()
                                      if _concurrency(self.rules, group) <= running})
        statement = LIMITED_WAITING
        if full:
            names, group_params = group_placeholders(full)
            statement, params = LIMITED_WAITING_OUTSIDE.format(groups=names), \
                {**params, **group_params}
        return [Waiting(job_id, Group(job_type, key))
                for job_id, job_type, key in self.cursor.execute(statement, params).fetchall()]

    def _bucket(self, group: Group) -> Bucket:
        """The group's bucket as this claim left it, or as stored (made when missing);
        a group without a rate has none to read."""
        rule = self.rules.get(group.job_type)
        if group in self.buckets or rule is None or rule.rate is None:
            return self.buckets.setdefault(group, Bucket(planner.FIRST_TOKENS, self.now))
        key = {"job_type": group.job_type, "key": group.key}
        self.cursor.execute(ENSURE_BUCKET, {**key, "tokens": planner.FIRST_TOKENS,
                                            "now": stamp(self.now)})
        tokens, refilled_at = self.cursor.execute(BUCKET, key).fetchone()
        self.buckets[group] = Bucket(float(tokens), datetime.fromisoformat(refilled_at))
        return self.buckets[group]


def _published(cursor: sqlite3.Cursor, job_types: Collection[str]) -> dict[str, LimitRule]:
    """The published rules of these types, read under the write lock: what every
    claimer enforces (a type without one here starts nothing)."""
    if not job_types:
        return {}
    names, params = placeholders("type", sorted(job_types))
    return {row[0]: stored_rule(*row)
            for row in cursor.execute(RULES_OF.format(types=names), params).fetchall()}


def _running(cursor: sqlite3.Cursor, rules: Mapping[str, LimitRule]) -> Counter[Group]:
    """The slots taken now: reserved jobs per group of the ruled types."""
    if not rules:
        return Counter()
    names, params = placeholders("type", list(rules))
    return Counter({Group(job_type, key): count for job_type, key, count
                    in cursor.execute(RUNNING_PER_GROUP.format(types=names), params).fetchall()})


def _concurrency(rules: Mapping[str, LimitRule], group: Group) -> float:
    rule = rules.get(group.job_type)
    return float("inf") if rule is None or rule.concurrency is None else rule.concurrency


def _rule_params(rule: LimitRule, now: str) -> dict[str, Any]:
    return {"job_type": rule.job_type, "concurrency": rule.concurrency,
            "rate_count": None if rule.rate is None else rule.rate.count,
            "rate_seconds": None if rule.rate is None else rule.rate.seconds, "now": now}
