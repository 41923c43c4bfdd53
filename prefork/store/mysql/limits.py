"""The MySQL store's concurrency and rate limits (prefork/limits), the same in both
dialects: publishing the rules, the limited claim, and the reads of the
supervisor's look and of `status`. A part of MySQLStore; its statements are
named in limit_queries.py.

The limited claim enforces the published rules (prefork_limits) of the types
the claimer handles, whatever rules it declares itself. It first asks, in one
round trip, where due limited jobs are (one read for all its queues; due.py: the
queues and their due priorities, so that no job not yet due is read), the rules,
and (1) how many limited jobs run per group, without locking. Then, of each such
queue in turn (planner.py decides, this carries it out; a later queue counts (1)
again): (2) read a few due limited jobs of its due priorities in claim order,
leaving out the groups (1) found full, so that a busy group's backlog hides no
other group's jobs, with their groups' buckets as they stand (when none of them
has room, say their rates are spent, read up to READ_BOUND more without them);
(3) make the rows of the groups that have none, autocommitted; then in one
transaction (4) lock the rows of the groups a plan on that snapshot would start
jobs of, and of a few next ones (claimers that read the same jobs then spread
over the groups instead of all trying the first), skipping those another
claimer holds; (5) count the running jobs and read the rules again, under those
locks: the truth (when that leaves too little room, lock the next groups, a few
times); (6) plan with the locked groups, those rules and the server's clock;
(7) lock the chosen jobs by primary key, still ready, reserve them as the plain
claim does, write the buckets that paid for them, commit.
"""
import functools
import math
import secrets
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ...jobs import Job, JobStatus
from ...limits.planner import FIRST_TOKENS, Bucket, Plan, Waiting, plan
from ...limits.published import log_replaced
from ...limits.rules import Group, LimitRule, LimitUsage, stored_rule
from ..contract import claimed_job
from .due import Target, due_in, in_order, target_args
from .due_queries import due_levels, levels
from .lifecycle import Claimant
from .limit_queries import (
    COUNT_RUNNING,
    DELETE_RULES,
    ENSURE_GROUP,
    LIMIT_USAGE,
    LIMITED_READY_COUNT,
    LOCK_GROUPS,
    LOCK_PLANNED,
    LOCK_TO_FLAG,
    READ_WAITING,
    RULES,
    RULES_OF,
    SET_LIMITED,
    UPSERT_RULE,
    WRITE_BUCKET,
    group_pairs,
)
from .portable_queries import READ_BACK_IDS, RESERVE_IDS
from .queries import COMMIT, START_TRANSACTION, placeholders, script
from .session import MySQLSession, Row, micros

# Due limited jobs a claim reads of a queue, its candidates: a few per job wanted
# first (most claims find room there), and when none of those had room, this
# many more of other groups.
FIRST_READ_PER_JOB, FIRST_READ_LEAST = 4, 16
READ_BOUND = 256
LOCK_ROUNDS = 4        # tries to lock groups when other claimers hold the first ones
LOCK_SPARE = 4         # groups locked beyond those planned: the next ones, should those fail
FLAG_BATCH = 1000      # jobs (un)flagged per transaction when the rules change
# Excludes nothing from READ_WAITING's NOT IN list (a job type is never empty).
NO_GROUP = Group("", "")
# What a claim counted: the running jobs per group, the published rules of its
# types, and those types.
Counted = tuple[Mapping[Group, int], Mapping[str, LimitRule], Sequence[str]]


class Snapshot:
    """What a claim read of one queue without locking: the waiting jobs in claim
    order, each group's bucket (a new one for a group without a row), the clock."""

    def __init__(self, rows: Sequence[Row]) -> None:
        ordered = sorted(rows, key=lambda row: (row[3], row[4], row[0]))
        self.now: datetime = max(row[7] for row in rows)
        self.waiting = [Waiting(row[0], Group(row[1], row[2])) for row in ordered]
        self.buckets: dict[Group, Bucket] = {}
        self.missing: set[Group] = set()
        for job in ordered:
            tokens, refilled_at = job[5], job[6]
            group = Group(job[1], job[2])
            if tokens is None:
                self.missing.add(group)
                self.buckets[group] = Bucket(FIRST_TOKENS, self.now)
            else:
                self.buckets[group] = Bucket(float(tokens), refilled_at)


class MySQLLimits(MySQLSession):
    # -- publishing the rules ------------------------------------------------------

    def publish_limits(self, rules: Sequence[LimitRule], handled_types: Sequence[str]) -> None:
        ruled = sorted({rule.job_type for rule in rules})
        unruled = sorted(set(handled_types) - set(ruled))
        # Only what changed is written: an enqueue reads a rule's row (or the gap
        # where it would be) under a shared lock held until its transaction ends,
        # so a write waits for the applications' open transactions that enqueued
        # such jobs (which makes their jobs flagged below). A restart with the
        # same rules waits for nobody.
        published = _rules_of(self._all(RULES))
        changed = [rule for rule in rules if published.get(rule.job_type) != rule]
        gone = [job_type for job_type in unruled if job_type in published]

        def record() -> None:
            with self._transaction() as cursor:
                for rule in changed:
                    values = _rule_values(rule)
                    cursor.execute(UPSERT_RULE, (rule.job_type, *values, *values))
                if gone:
                    cursor.execute(DELETE_RULES.format(types=placeholders(len(gone))), gone)
        if changed or gone:
            self._retry_contention(record)
            log_replaced(published, changed, gone)
        # After the rules committed: a job enqueued from now on reads them itself.
        self._flag_live_jobs(ruled, 1)
        self._flag_live_jobs(unruled, 0)

    def _flag_live_jobs(self, types: Sequence[str], flag: int) -> None:
        """Set `limited` to flag on the ready and reserved jobs of these types, in
        bounded transactions."""
        if not types:
            return
        lock = LOCK_TO_FLAG.format(types=placeholders(len(types)))
        for status in (JobStatus.READY, JobStatus.RESERVED):
            batch = functools.partial(self._flag_batch, lock,
                                      (status.value, *types, flag, FLAG_BATCH), flag)
            while self._retry_contention(batch) == FLAG_BATCH:
                pass

    def _flag_batch(self, lock: str, args: Sequence[Any], flag: int) -> int:
        with self._transaction() as cursor:
            cursor.execute(lock, args)
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                cursor.execute(SET_LIMITED.format(ids=placeholders(len(ids))), (flag, *ids))
            return len(ids)

    # -- the limited claim -------------------------------------------------------------

    def claim_limited(self, queues: Sequence[str], worker: str, lease_seconds: float,
                      limit: int, process_id: int | None,
                      job_types: Collection[str]) -> tuple[list[Job], float | None]:
        jobs: list[Job] = []
        waits: list[float] = []
        types = sorted(set(job_types))
        due, running, rules = self._due_running_and_rules(queues, types)
        for number, target in enumerate(due):
            if len(jobs) >= limit:
                break
            if number:   # the earlier queue's claim started some
                running, rules = self._running_and_rules(types)
            claimed, retry_after = self._claim_limited_of(
                target, (running, rules, types), limit - len(jobs),
                (worker, lease_seconds, process_id))
            jobs += claimed
            if retry_after is not None:
                waits.append(retry_after)
        return jobs, min(waits, default=None)

    def _due_running_and_rules(self, queues: Sequence[str], types: Sequence[str]
                               ) -> tuple[list[Target], dict[Group, int], dict[str, LimitRule]]:
        """Where due limited jobs are, and step 1 of the first queue: the queues with
        due limited jobs, in order, each with every due priority (no cut, as
        due.targets() makes for the plain claim: this claim reads past the jobs of
        groups without room, so a cut would hide later priorities' jobs behind a full
        group's), the running jobs per group and the rules of these types. One round
        trip."""
        if not queues or not types:
            return [], {}, {}
        due, running, rules = self._script_results(
            script(due_levels(len(queues), limited=True), COUNT_RUNNING,
                   RULES_OF.format(types=placeholders(len(types)))), [*queues, *types])
        return in_order(queues, due), _running_of(running), _rules_of(rules)

    def _running_and_rules(self, types: Sequence[str]
                           ) -> tuple[dict[Group, int], dict[str, LimitRule]]:
        """The running jobs per group and the published rules of these types, as they
        are now (in a transaction: under its locks). One round trip."""
        running, rules = self._script_results(
            script(COUNT_RUNNING, RULES_OF.format(types=placeholders(len(types)))), types)
        return _running_of(running), _rules_of(rules)

    def _claim_limited_of(self, target: Target, counted: Counted, limit: int,
                          claimant: Claimant) -> tuple[list[Job], float | None]:
        """Steps 2-7 of the module's docstring, for one queue and its due priorities,
        with the running jobs counted and the rules read (step 1)."""
        running, rules, _ = counted
        snapshot, waits = self._foresee(target, running, rules, limit)
        if snapshot is None:
            return [], min(waits, default=None)
        if snapshot.missing:
            self._retry_contention(functools.partial(self._ensure_groups, snapshot.missing))
        jobs, retry_after = self._retry_contention(
            lambda: self._claim_planned(snapshot, counted, limit, claimant))
        # The groups not locked (held elsewhere) wait no longer than foreseen.
        waits += [] if retry_after is None else [retry_after]
        return jobs, min(waits, default=None)

    def _foresee(self, target: Target, running: Mapping[Group, int],
                 rules: Mapping[str, LimitRule], limit: int
                 ) -> tuple[Snapshot | None, list[float]]:
        """Steps 1 and 2: the waiting jobs read, when a plan on them starts some (else
        None: no lock is taken), and the waits of the rate-starved groups seen."""
        passed_over = [group for group, count in running.items()
                       if count >= _concurrency(rules, group)]
        waits: list[float] = []
        first_read = min(READ_BOUND, max(FIRST_READ_LEAST, FIRST_READ_PER_JOB * limit))
        for bound in (first_read, READ_BOUND):
            read = READ_WAITING.format(levels=levels(len(target.priorities)),
                                       groups=group_pairs(len(passed_over) or 1))
            rows = self._all(read, (*target_args(target), *_flat(passed_over or [NO_GROUP]),
                                    bound))
            if not rows:
                break
            snapshot = Snapshot(rows)
            foreseen = plan(snapshot.waiting, rules, snapshot.buckets, running, snapshot.now,
                            limit)
            waits += [] if foreseen.retry_after is None else [foreseen.retry_after]
            if foreseen.job_ids:
                return snapshot, waits
            if len(rows) < bound:
                break
            # A whole read of groups without room (their rates spent, say) may hide
            # other groups' jobs behind it: read again without them.
            passed_over += sorted(snapshot.buckets)
        return None, waits

    def _ensure_groups(self, groups: Iterable[Group]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(ENSURE_GROUP, [(*group, FIRST_TOKENS) for group in sorted(groups)])

    def _claim_planned(self, snapshot: Snapshot, counted: Counted, limit: int,
                       claimant: Claimant) -> tuple[list[Job], float | None]:
        """Steps 4-7: one transaction."""
        self.conn.begin()
        try:
            locked, (running, rules, _), now = self._lock_groups(snapshot, counted, limit)
            chosen = plan(snapshot.waiting, rules, locked, running, now, limit)
            if not chosen.job_ids:
                self.conn.commit()
                return [], chosen.retry_after
            with self.conn.cursor() as cursor:
                cursor.execute(LOCK_PLANNED.format(ids=placeholders(len(chosen.job_ids))),
                               chosen.job_ids)
                still_ready = {row[0] for row in cursor.fetchall()}
            # Whatever left `ready` since it was read neither starts nor spends a token.
            started = plan([job for job in snapshot.waiting if job.job_id in still_ready],
                           rules, locked, running, now, limit)
            rows = self._reserve_started(started, claimant)
        except BaseException:
            self._rollback_quietly()   # _retry_contention retries what is contention
            raise
        return [claimed_job(row[:-1], row[-1], self) for row in rows], chosen.retry_after

    def _lock_groups(self, snapshot: Snapshot, counted: Counted, limit: int
                     ) -> tuple[dict[Group, Bucket], Counted, datetime]:
        """Lock the rows of the groups a plan on the snapshot starts jobs of, and count
        the running jobs and read the rules again under those locks: the truth. When
        another claimer holds some of them, or the count leaves some without room (a
        claimer that just committed filled them), plan again with the next groups, a
        few times: (the locked groups' buckets, (the running jobs counted, the rules,
        the types), the server's clock). No group locked: nothing may start."""
        running, rules, types = counted
        locked: dict[Group, Bucket] = {}
        held_elsewhere: set[Group] = set()
        now = snapshot.now
        for _ in range(LOCK_ROUNDS):
            open_groups = {group: bucket for group, bucket in snapshot.buckets.items()
                           if group not in held_elsewhere}
            tentative = plan(snapshot.waiting, rules, {**open_groups, **locked}, running, now,
                             limit + LOCK_SPARE)
            wanted = sorted(_groups_of(tentative, snapshot.waiting) - set(locked))
            if not wanted:
                break
            with self.conn.cursor() as cursor:
                cursor.execute(LOCK_GROUPS.format(groups=group_pairs(len(wanted))),
                               _flat(wanted))
                for job_type, key, tokens, refilled_at, clock in cursor.fetchall():
                    locked[Group(job_type, key)] = Bucket(float(tokens), refilled_at)
                    now = clock
            held_elsewhere |= set(wanted) - set(locked)
            running, rules = self._running_and_rules(types)
            starting = plan(snapshot.waiting, rules, locked, running, now, limit)
            if len(starting.job_ids) >= min(limit, len(tentative.job_ids)):
                break
        return locked, (running, rules, types), now

    def _reserve_started(self, started: Plan, claimant: Claimant) -> list[Row]:
        """Reserve the started jobs as the plain claim does, write the buckets that
        paid for them, commit: the jobs' rows (READ_BACK_IDS)."""
        if not started.job_ids:
            self.conn.commit()
            return []
        worker, lease_seconds, process_id = claimant
        ids = placeholders(len(started.job_ids))
        buckets = sorted(started.buckets.items())
        statements = [RESERVE_IDS.format(ids=ids), READ_BACK_IDS.format(ids=ids),
                      *[WRITE_BUCKET] * len(buckets), COMMIT]
        secret = secrets.token_hex(16)
        args: list[Any] = [secret, micros(lease_seconds), worker, process_id,
                           *started.job_ids, *started.job_ids, secret]
        for group, bucket in buckets:
            args += [bucket.tokens, bucket.refilled_at, *group]
        (rows,) = self._script_results(script(*statements), args)
        return rows

    # -- the supervisor's look and status --------------------------------------------------

    def limited_ready(self, queues: Sequence[str], limit: int) -> int:
        # Idle, one read finds nothing due. Each due priority holds a due job at
        # least, so a queue with as many as the limit counts the limit unread (the
        # supervisor's look asks for one): one more round trip counts the others.
        due = due_in(self, queues, limited=True)
        few = [target for target in due if len(target.priorities) < limit]
        if not few:
            return limit * len(due)
        counts = self._script_results(
            script(*[LIMITED_READY_COUNT.format(levels=levels(len(target.priorities)))
                     for target in few]),
            [value for target in few for value in (*target_args(target), limit)])
        return limit * (len(due) - len(few)) + sum(int(rows[0][0]) for rows in counts)

    def limit_usage(self) -> list[LimitUsage]:
        rules = _rules_of(self._all(RULES))
        if not rules:
            return []
        return [LimitUsage.of(rules[job_type], key, int(running), int(waiting))
                for job_type, key, running, waiting
                in self._all(LIMIT_USAGE.format(types=placeholders(len(rules))), list(rules))]


def _rule_values(rule: LimitRule) -> tuple[int | None, int | None, int | None]:
    """(concurrency, rate count, rate seconds) as prefork_limits stores a rule."""
    rate = rule.rate
    return (rule.concurrency, None if rate is None else rate.count,
            None if rate is None else rate.seconds)


def _concurrency(rules: Mapping[str, LimitRule], group: Group) -> float:
    """The group's concurrency limit; infinite without one."""
    rule = rules.get(group.job_type)
    return math.inf if rule is None or rule.concurrency is None else rule.concurrency


def _rules_of(rows: Iterable[Row]) -> dict[str, LimitRule]:
    """{type: rule} of RULES' (or RULES_OF's) rows."""
    return {row[0]: stored_rule(*row) for row in rows}


def _running_of(rows: Iterable[Row]) -> dict[Group, int]:
    """The running jobs per group, of COUNT_RUNNING's rows."""
    return {Group(job_type, key): int(count) for job_type, key, count in rows}


def _groups_of(chosen: Plan, waiting: Iterable[Waiting]) -> set[Group]:
    ids = set(chosen.job_ids)
    return {job.group for job in waiting if job.job_id in ids}


def _flat(groups: Iterable[Group]) -> list[str]:
    """The parameters of group_pairs(): type, key of each group in turn."""
    return [value for group in groups for value in group]
