"""The MySQL store's job life cycle: claims and group completions (one round trip
and one commit each: multi-statement scripts of queries.py), and what happens to
one job under its lease (completing with the caller's effect, failing, releasing,
extending, handing back, recovering expired leases). A part of MySQLStore.

A failed attempt and a hand-back append to the job's error history in Python,
under the row's lock (failure_queries.py): the failure path is not the hot one.
"""
import functools
import json
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pymysql

from ...errors import CommitConflict, LeaseLost
from ...failures import appended_history, bounded
from ...jobs import Job, JobStatus, Lease
from ...retry import Decision, RetryPolicy, hand_back_decision
from ..contract import claimed_job, members_apart
from .queries import (
    CLAIM,
    COMPLETE_AND_CLAIM,
    COMPLETE_GROUP,
    COUNT_DONE_UNDER_LEASE,
    EXTEND,
    EXTEND_MANY,
    LOCK_EXPIRED,
    READY_COUNT,
    RECOVER_EXPIRED,
    RELEASE,
    RELEASE_GROUP,
    lease_pairs,
    placeholders,
    script,
)
from .completion_queries import AUTOCOMMIT_OFF, AUTOCOMMIT_ON, COMMIT, COMPLETE
from .due import MySQLDue, Target, target_args
from .due_queries import levels
from .failure_queries import FAIL, HAND_BACK, LOCK_FAILING, LOCK_HELD
from .members import MySQLMembers
from .session import error_code, is_contention, micros
from .workflows import MySQLFlows

# Who claims: (worker "host:pid", lease seconds, supervisor registry id or None).
Claimant = tuple[str, float, int | None]


class MySQLLifeCycle(MySQLDue, MySQLMembers):
    # -- claims and group completions ------------------------------------------------
    # Each first asks where due jobs are (due.py), then claims there only.

    def claim(self, queues: Sequence[str], worker: str, lease_seconds: float, limit: int = 1,
              process_id: int | None = None) -> list[Job]:
        claimant = (worker, lease_seconds, process_id)
        return self._claim_targets((), self._due_targets(queues), limit, claimant)[1]

    def complete_and_claim(self, leases: Sequence[Lease], queues: Sequence[str], worker: str,
                           lease_seconds: float, process_id: int | None = None,
                           limit: int = 1) -> tuple[set[int], list[Job]]:
        # Members complete in a transaction of their own (members.py), the rest with the claim.
        members, leases = members_apart(leases)
        done = self._complete_members(members) if members else set()
        targets = self._due_targets(queues)
        if not targets:
            return done | self._complete_plain(leases), []
        completed, jobs = self._claim_targets(leases, targets, limit,
                                              (worker, lease_seconds, process_id))
        return done | completed, jobs

    def _claim_targets(self, leases: Sequence[Lease], targets: Sequence[Target], limit: int,
                       claimant: Claimant) -> tuple[set[int], list[Job]]:
        """Claim up to `limit` jobs from the targets in order, completing `leases`
        in the first one's transaction: (ids completed, [Job])."""
        completed: set[int] = set()
        jobs: list[Job] = []
        for target in targets:
            done, claimed = self._claim_or_complete(leases, target, limit - len(jobs), claimant)
            completed, leases, jobs = completed | done, (), jobs + claimed
            if len(jobs) >= limit:
                break
        return completed, jobs

    def _claim_or_complete(self, leases: Sequence[Lease], target: Target, limit: int,
                           claimant: Claimant) -> tuple[set[int], list[Job]]:
        """_run_claim; when it is still contended after its retries (writers on
        several cluster nodes all want the queue's head), nothing is claimed this
        time: the completions go alone, and the worker asks again later."""
        try:
            return self._run_claim(leases, target, limit, claimant)
        except pymysql.err.OperationalError as exc:
            if not is_contention(exc):
                raise
            return self._complete_plain(leases), []

    def complete_many(self, leases: Sequence[Lease]) -> set[int]:
        members, plain = members_apart(leases)
        done = self._complete_members(members) if members else set()
        return done | self._complete_plain(plain)

    def _complete_plain(self, leases: Sequence[Lease]) -> set[int]:
        """complete_many() of jobs that are no workflow's members: one script."""
        if not leases:
            return set()
        results = self._retry_contention(
            lambda: self._script_results(_fenced(COMPLETE_GROUP, leases), _flat(leases) * 2))
        return _completed_ids(results[-1][0][0])

    def _run_claim(self, leases: Sequence[Lease], target: Target, limit: int,
                   claimant: Claimant) -> tuple[set[int], list[Job]]:
        """In one transaction, complete `leases` (none for a plain claim) and claim up
        to `limit` jobs of one target; returns (ids of the jobs it completed, [Job])."""
        worker, lease_seconds, process_id = claimant
        claim_script = _fenced(COMPLETE_AND_CLAIM if leases else CLAIM, leases, target)
        secret = secrets.token_hex(16)   # the reservation's and the read-back's fence
        args = (*_flat(leases) * 2, *target_args(target), limit, secret, micros(lease_seconds),
                worker, process_id, secret)
        rows, ((completed,),) = self._retry_contention(
            lambda: self._script_results(claim_script, args))
        return _completed_ids(completed), [claimed_job(row[:-1], row[-1], self) for row in rows]

    def ready_count(self, queues: Sequence[str], limit: int) -> int:
        # Idle, one read finds nothing due; else one more round trip counts, one
        # count per target, in one script.
        targets = self._due_targets(queues)
        if not targets:
            return 0
        counts = self._script_results(
            script(*[_fenced(READY_COUNT, (), target) for target in targets]),
            [value for target in targets for value in (*target_args(target), limit)])
        return sum(int(rows[0][0]) for rows in counts)

    # -- one job under its lease -----------------------------------------------------------

    # How a handler's transaction starts (sent ahead of COMPLETE) and commits, and
    # what undoes the start once it committed (completion_queries.py): the mariadb
    # dialect's commit leaves autocommit off, to be turned back on ahead of the next
    # command, unless that is the next job's COMPLETE, which wants it off. (The mysql
    # dialect's commit undoes its start at once: its bound must not outlast it.)
    completion_start, completion_end = AUTOCOMMIT_OFF, COMMIT
    completion_undo: str | None = AUTOCOMMIT_ON

    @contextmanager
    def completing(self, job: Job) -> Iterator[pymysql.cursors.Cursor]:
        # The handler gets our cursor: no statements stacked after an injected ';'.
        # Both switches go ahead of COMPLETE, in its round trip; autocommit is still
        # off when the last job's transaction left it so (its undo was pending).
        self._multi_statements(False)
        if self.conn.take_pending() is None:
            self._send_ahead(self.completion_start, self._completion_start_args())
        with self.conn.cursor() as cursor:
            try:
                # Fenced and locked at once (see COMPLETE): the lease cannot be lost
                # once this succeeds, and a rollback undoes it with the effect.
                if cursor.execute(COMPLETE, job.lease) != 1:
                    raise LeaseLost(f"job {job.id}: lease lost before completion")
                yield cursor
                if job.lease.in_workflow:   # its workflow's bookkeeping commits with it
                    MySQLFlows(cursor).settle_ids([(job.id, JobStatus.DONE)])
                cursor.execute(self.completion_end)
            except pymysql.err.OperationalError as exc:
                self._end_rolled_back()
                if is_contention(exc):   # rolled back, the job still ours: not a failure
                    raise CommitConflict(f"job {job.id}: its transaction lost to a concurrent"
                                         f" one ({error_code(exc)}), rolled back") from exc
                raise
            except BaseException:
                self._end_rolled_back()
                raise
        if self.completion_undo is not None:
            self.conn.leave_pending(self.completion_undo.encode())
        job.finished = True

    def _completion_start_args(self) -> tuple[Any, ...]:
        return ()

    def _end_rolled_back(self) -> None:
        """After a failed completion: roll back, then undo its start (with nothing
        left to commit)."""
        self._rollback_quietly()
        try:
            with self.conn.cursor() as cursor:
                cursor.execute(self.completion_undo or self.completion_end)
        except pymysql.err.Error:
            pass   # the connection is gone (maybe ended by a bound): nothing to restore

    def fail(self, job: Job, error: str, decision: Decision) -> bool:
        return self._retry_contention(functools.partial(self._fail, job, bounded(error),
                                                        decision))

    def _fail(self, job: Job, error: str, decision: Decision) -> bool:
        with self._transaction() as cursor:
            if cursor.execute(LOCK_FAILING, job.lease) != 1:
                return False
            locked = cursor.fetchone()
            assert locked is not None
            history, now, cancelling = locked
            status = failed_status(decision.dead, cancelling)
            if cursor.execute(FAIL, (status.value, error,
                                     appended_history(history, job.attempt, now, error),
                                     micros(decision.delay), status.value, *job.lease)) != 1:
                return False
            if job.lease.in_workflow:
                MySQLFlows(cursor).settle_ids([(job.id, status)])
            return True

    def release(self, job: Job) -> bool:
        if job.lease.in_workflow:
            return job.id in self._release_members([job.lease])
        return self._rowcount(_fenced(RELEASE, [job.lease]), job.lease) == 1

    def release_many(self, jobs: Sequence[Job]) -> set[int]:
        members, leases = members_apart([job.lease for job in jobs])
        released = self._release_members(members) if members else set()
        if len(leases) <= 1:
            return released | {lease.job_id for lease in leases
                               if self._rowcount(_fenced(RELEASE, [lease]), lease) == 1}
        (locked,) = self._retry_contention(lambda: self._script_results(
            _fenced(RELEASE_GROUP, leases), _flat(leases) * 2))
        return released | {row[0] for row in locked}

    def extend(self, job: Job, lease_seconds: float) -> bool:
        return self._rowcount(EXTEND, (micros(lease_seconds), job.id, job.lease_token)) == 1

    def extend_many(self, leases: Sequence[Lease], lease_seconds: float) -> int:
        if not leases:
            return 0
        extended = self._rowcount(_fenced(EXTEND_MANY, leases),
                                  (micros(lease_seconds),) + _flat(leases))
        if extended == len(leases):
            return extended
        return extended + int(self._one(_fenced(COUNT_DONE_UNDER_LEASE, leases),
                                        _flat(leases))[0])

    def hand_back(self, job_id: int, lease_token: str, cause: str, policy: RetryPolicy,
                  max_crashes: int, charge: bool = True) -> JobStatus | None:
        return self._retry_contention(functools.partial(
            self._hand_back, job_id, lease_token, cause, policy, max_crashes, charge))

    def _hand_back(self, job_id: int, lease_token: str, cause: str, policy: RetryPolicy,
                   max_crashes: int, charge: bool) -> JobStatus | None:
        with self._transaction() as cursor:
            if cursor.execute(LOCK_HELD, (job_id, lease_token)) != 1:
                return None
            held = cursor.fetchone()
            assert held is not None
            attempts, max_attempts, crashes, history, now, cancelling = held
            status, delay, error = hand_back_decision(attempts, max_attempts, crashes, cause,
                                                     policy, max_crashes, charge)
            status = failed_status(status is JobStatus.DEAD, cancelling)
            error = bounded(error)
            if charge:   # a used attempt is a failed one; a restored one is not
                history = appended_history(history, attempts, now, error)
            handed = cursor.execute(HAND_BACK, (status.value, 0 if charge else 1,
                                                1 if charge else 0, error, history, micros(delay),
                                                status.value, job_id, lease_token))
            if handed != 1:
                return None
            if Lease(job_id, lease_token).in_workflow:
                MySQLFlows(cursor).settle_ids([(job_id, status)])
            return status

    def recover_expired(self, limit: int = 100) -> int:
        return self._retry_contention(functools.partial(self._recover_expired, limit))

    def _recover_expired(self, limit: int) -> int:
        with self._transaction() as cursor:
            cursor.execute(LOCK_EXPIRED, (limit,))
            rows = cursor.fetchall()
            if not rows:
                return 0
            ids = [row[0] for row in rows]
            recovered = cursor.execute(RECOVER_EXPIRED.format(ids=placeholders(len(ids))), ids)
            MySQLFlows(cursor).settle_returned([job_id for job_id, member in rows if member])
            return recovered


def failed_status(dead: bool, cancelling: int) -> JobStatus:
    """Where a reserved job goes when its attempt failed or its worker died: cancelled
    when its cancellation is pending, else dead or ready as decided."""
    if cancelling:
        return JobStatus.CANCELLED
    return JobStatus.DEAD if dead else JobStatus.READY


def _fenced(statement: str, leases: Sequence[Lease], target: Target | None = None) -> str:
    """A statement (or script) whose {lease_pairs} fence covers these leases and whose
    {levels} list the target's priorities."""
    count = len(target.priorities) if target else 0
    return statement.format(lease_pairs=lease_pairs(len(leases)), levels=levels(count))


def _flat(leases: Sequence[Lease]) -> tuple[Any, ...]:
    """The fence's parameters: id, token of each lease in turn."""
    return tuple(value for lease in leases for value in lease)


def _completed_ids(json_ids: str | None) -> set[int]:
    return set(json.loads(json_ids)) if json_ids else set()
