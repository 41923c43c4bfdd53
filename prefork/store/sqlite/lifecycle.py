"""The SQLite store's job life cycle: claims and group completions (each one write
transaction: on SQLite the lock and the commit are the cost, not the statements),
and what happens to one job under its lease (completing with the caller's
effect, failing, releasing, extending, handing back, recovering expired leases).
A part of SQLiteStore.
"""
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import Any

from ...errors import LeaseLost
from ...failures import appended_history, bounded
from ...jobs import MEMBER_TOKEN_MARK, Job, JobStatus, Lease, utc_now
from ...retry import Decision, RetryPolicy, hand_back_decision
from ..contract import ClaimedRow, claimed_job, members_apart
from .due import priorities
from .file import stamp, times
from .paramstyle import FormatCursor
from .queries import (
    CLAIM_RESERVE,
    CLAIM_SELECT,
    COMPLETE,
    DONE_WITH_TOKEN,
    EXPIRED,
    EXTEND,
    FAIL,
    FAILING_HISTORY,
    HAND_BACK,
    HELD_BY_TOKEN,
    HOLDS_LEASE,
    READY_COUNT,
    RECOVER_EXPIRED,
    RELEASE,
    placeholders,
)
from .session import SQLiteSession
from .workflow_queries import MEMBER_LEASE
from .workflows import SQLiteFlows

# Who claims: (worker "host:pid", supervisor registry id or None).
Claimant = tuple[str, int | None]


class SQLiteLifeCycle(SQLiteSession):
    # -- claims and group completions ------------------------------------------------

    def claim(self, queues: Sequence[str], worker: str, lease_seconds: float, limit: int = 1,
              process_id: int | None = None) -> list[Job]:
        with self._write() as cursor:
            stamps = times(utc_now(), lease_until=lease_seconds)
            return self._reserve(cursor, queues, (worker, process_id), limit, stamps)

    def complete_and_claim(self, leases: Sequence[Lease], queues: Sequence[str], worker: str,
                           lease_seconds: float, process_id: int | None = None,
                           limit: int = 1) -> tuple[set[int], list[Job]]:
        # One lock and one commit instead of several: on SQLite the commit is the cost.
        with self._write() as cursor:
            stamps = times(utc_now(), lease_until=lease_seconds)
            completed = _complete_leases(cursor, leases, stamps)
            next_jobs = self._reserve(cursor, queues, (worker, process_id), limit, stamps)
        return completed, next_jobs

    def complete_many(self, leases: Sequence[Lease]) -> set[int]:
        if not leases:
            return set()
        with self._write() as cursor:
            return _complete_leases(cursor, leases, times(utc_now()))

    def _reserve(self, cursor: sqlite3.Cursor, queues: Sequence[str], claimant: Claimant,
                 limit: int, stamps: dict[str, str]) -> list[Job]:
        """Claim up to `limit` ready jobs inside the caller's write transaction."""
        rows = _ready_rows(cursor, queues, limit, stamps["now"])
        return self._reserve_rows(cursor, rows, claimant, stamps)

    def _reserve_rows(self, cursor: sqlite3.Cursor, rows: Sequence[ClaimedRow],
                      claimant: Claimant, stamps: dict[str, str]) -> list[Job]:
        """Reserve the jobs of these claim rows (read under the write lock the caller
        holds): a fresh token each, the attempt, the lease, the claimant."""
        worker, process_id = claimant
        tokens = [_token(bool(row[-1])) for row in rows]   # the last column: a member?
        cursor.executemany(CLAIM_RESERVE, [{**stamps, "token": token, "worker": worker,
                                            "process_id": process_id, "id": row[0]}
                                           for row, token in zip(rows, tokens)])
        return [claimed_job(row[:-1], token, self) for row, token in zip(rows, tokens)]

    def ready_count(self, queues: Sequence[str], limit: int) -> int:
        return self._count_ready(queues, limit, limited=False)

    def _count_ready(self, queues: Sequence[str], limit: int, limited: bool) -> int:
        """Due unlimited (or limited) jobs of these queues, at most `limit` per queue."""
        now = stamp(utc_now())
        total = 0
        for queue in dict.fromkeys(queues):   # a queue listed twice is read once
            counted = 0
            for priority in priorities(self._read, queue, limited):
                with closing(self._read(READY_COUNT, {
                        "queue": queue, "priority": priority, "now": now,
                        "limit": limit - counted, "limited": int(limited)})) as cursor:
                    counted += int(cursor.fetchone()[0])
                if counted >= limit:
                    break
            total += counted
        return total

    # -- one job under its lease -----------------------------------------------------------

    @contextmanager
    def completing(self, job: Job) -> Iterator[FormatCursor]:
        with self._write() as cursor:
            cursor.execute(HOLDS_LEASE, {**_lease(job.lease), **times(utc_now())})
            if cursor.fetchone() is None:
                raise LeaseLost(f"job {job.id}: lease lost before completion")
            # The handler's cursor, in the same transaction, takes %s as on MySQL.
            with closing(cursor.connection.cursor(FormatCursor)) as handler_cursor:
                yield handler_cursor
            # Fenced again: the lease may have run out while the effect was written.
            cursor.execute(COMPLETE, {**_lease(job.lease), **times(utc_now())})
            if cursor.rowcount != 1:
                raise LeaseLost(f"job {job.id}: lease lost during completion")
            if job.lease.in_workflow:   # its workflow's bookkeeping commits with it
                SQLiteFlows(cursor).settle_ids([(job.id, JobStatus.DONE)])
        job.finished = True

    def fail(self, job: Job, error: str, decision: Decision) -> bool:
        status = JobStatus.DEAD if decision.dead else JobStatus.READY
        error = bounded(error)
        with self._write() as cursor:
            now = utc_now()
            stamps = times(now, available_at=decision.delay)
            held = cursor.execute(FAILING_HISTORY, {**_lease(job.lease), **stamps}).fetchone()
            if held is None:
                return False
            cursor.execute(FAIL, {**_lease(job.lease), **stamps, "status": status.value,
                                  "error": error,
                                  "history": appended_history(held[0], job.attempt, now, error)})
            if cursor.rowcount != 1:
                return False
            if job.lease.in_workflow:   # dead, or cancelled: FAIL decides that
                SQLiteFlows(cursor).settle_returned([job.id])
            return True

    def release(self, job: Job) -> bool:
        return job.id in self.release_many([job])

    def release_many(self, jobs: Sequence[Job]) -> set[int]:
        if not jobs:
            return set()
        with self._write() as cursor:
            stamps = times(utc_now())
            released = {job.id for job in jobs
                        if cursor.execute(RELEASE, {**_lease(job.lease), **stamps}).rowcount == 1}
            # A member whose cancellation was pending ended cancelled.
            SQLiteFlows(cursor).settle_returned(
                [job.id for job in jobs if job.id in released and job.lease.in_workflow])
            return released

    def extend(self, job: Job, lease_seconds: float) -> bool:
        return self._write_one(EXTEND, _lease(job.lease), lease_until=lease_seconds) == 1

    def extend_many(self, leases: Sequence[Lease], lease_seconds: float) -> int:
        if not leases:
            return 0
        # One transaction of many small updates: on SQLite the cost is the
        # lock and the commit, not the number of statements.
        with self._write() as cursor:
            stamps = times(utc_now(), lease_until=lease_seconds)
            cursor.executemany(EXTEND, [{**stamps, **_lease(lease)} for lease in leases])
            extended = cursor.rowcount
            if extended == len(leases):
                return extended
            return extended + sum(
                cursor.execute(DONE_WITH_TOKEN, _lease(lease)).fetchone() is not None
                for lease in leases)

    def hand_back(self, job_id: int, lease_token: str, cause: str, policy: RetryPolicy,
                  max_crashes: int, charge: bool = True) -> JobStatus | None:
        with self._write() as cursor:
            held = cursor.execute(HELD_BY_TOKEN, {"id": job_id, "token": lease_token}).fetchone()
            if held is None:
                return None
            attempts, max_attempts, crashes, history, cancel_requested = held
            status, delay, error = hand_back_decision(attempts, max_attempts, crashes, cause,
                                                     policy, max_crashes, charge)
            error, now = bounded(error), utc_now()
            if charge:   # a used attempt is a failed one; a restored one is not
                history = appended_history(history, attempts, now, error)
            if cancel_requested:
                status = JobStatus.CANCELLED
            cursor.execute(HAND_BACK, {
                "id": job_id, "status": status.value, "restored": 0 if charge else 1,
                "crashed": 1 if charge else 0, "error": error, "history": history,
                **times(now, available_at=delay)})
            if Lease(job_id, lease_token).in_workflow:
                SQLiteFlows(cursor).settle_ids([(job_id, status)])
            return status

    def recover_expired(self, limit: int = 100) -> int:
        with self._write() as cursor:
            stamps = times(utc_now())
            rows = cursor.execute(EXPIRED, {**stamps, "limit": limit}).fetchall()
            if not rows:
                return 0
            ids, params = placeholders("id", [row[0] for row in rows])
            recovered = int(cursor.execute(RECOVER_EXPIRED.format(ids=ids),
                                           {**params, **stamps}).rowcount)
            SQLiteFlows(cursor).settle_returned([job_id for job_id, member in rows if member])
            return recovered


def _lease(lease: Lease) -> dict[str, Any]:
    """A lease as a statement's :id and :token."""
    job_id, token = lease
    return {"id": job_id, "token": token}


def _complete_leases(cursor: sqlite3.Cursor, leases: Sequence[Lease],
                     stamps: dict[str, str]) -> set[int]:
    """Complete each leased job inside the caller's write transaction; the ids
    completed, now or already with the same lease."""
    members, plain = members_apart(leases)
    completed = set()
    for lease in plain:
        cursor.execute(COMPLETE, {**_lease(lease), **stamps})
        if cursor.rowcount == 1 or cursor.execute(DONE_WITH_TOKEN, _lease(lease)).fetchone():
            completed.add(lease[0])
    return completed | _complete_members(cursor, members, stamps)


def _complete_members(cursor: sqlite3.Cursor, leases: Sequence[Lease],
                      stamps: dict[str, str]) -> set[int]:
    """_complete_leases() of workflow members, with their workflows' bookkeeping."""
    completed, fresh = set(), []
    for lease in leases:
        held = cursor.execute(MEMBER_LEASE, {**_lease(lease), **stamps}).fetchone()
        if held is None:
            continue
        status, workflow_id, step = held
        if status == JobStatus.RESERVED:
            cursor.execute(COMPLETE, {**_lease(lease), **stamps})
            fresh.append((int(workflow_id), int(step), JobStatus.DONE))
        completed.add(lease.job_id)
    SQLiteFlows(cursor, stamps["now"]).settle(fresh)
    return completed


def _token(member: bool) -> str:
    """A fresh lease token; a workflow member's is marked (jobs.MEMBER_TOKEN_MARK)."""
    token = secrets.token_hex(16)
    return MEMBER_TOKEN_MARK + token[1:] if member else token


def _ready_rows(cursor: sqlite3.Cursor, queues: Sequence[str], limit: int,
                now: str) -> list[tuple[Any, ...]]:
    """Up to `limit` due ready rows, trying the queues in order and each queue's
    priorities in order (the caller holds the write lock)."""
    rows: list[tuple[Any, ...]] = []
    for queue in dict.fromkeys(queues):   # a queue listed twice is read once
        for priority in priorities(cursor.execute, queue, limited=False):
            cursor.execute(CLAIM_SELECT, {"queue": queue, "priority": priority, "now": now,
                                          "limit": limit - len(rows)})
            rows.extend(cursor.fetchall())
            if len(rows) >= limit:
                return rows
    return rows
