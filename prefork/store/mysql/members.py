"""The MySQL store's paths for workflow members, the same in both dialects: a group
of members completed, or given back, in a transaction of its own that carries their
workflows' bookkeeping (store/flows.py), where plain jobs take one script; members
among the jobs a statement returns (lease expiry, a silent supervisor's, strays);
a retry of members; and what a Client asks of workflows. A part of MySQLStore. A
plain job never comes here: its statements stay as they are.
"""
import functools
from collections.abc import Sequence
from typing import Any

from ...jobs import JobStatus, Lease
from ...workflows.model import Enqueued, Place, Progress
from ...workflows.plan import Plan
from ...workflows.spec import Step
from ..flows import text
from .portable_queries import COMPLETE_LEASED
from .queries import RELEASE, lease_pairs, placeholders
from .session import MySQLSession
from .workflow_queries import LOCK_MEMBER_LEASES, LOCK_RELEASING, LOCK_RESERVED_MEMBERS
from .workflows import MySQLFlows


class MySQLMembers(MySQLSession):
    # -- members' leases -------------------------------------------------------------------

    def _complete_members(self, leases: Sequence[Lease]) -> set[int]:
        """Complete members (done now, or already under these leases), with their
        workflows' bookkeeping, in one transaction: the ids completed."""
        return self._retry_contention(functools.partial(self._complete_members_once, leases))

    def _complete_members_once(self, leases: Sequence[Lease]) -> set[int]:
        fence, args = lease_pairs(len(leases)), _flat(leases)
        with self._transaction() as cursor:
            cursor.execute(LOCK_MEMBER_LEASES.format(lease_pairs=fence), args)
            rows = cursor.fetchall()
            fresh = [(int(row[2]), int(row[3]), JobStatus.DONE) for row in rows
                     if text(row[1]) == JobStatus.RESERVED]
            if fresh:
                cursor.execute(COMPLETE_LEASED.format(lease_pairs=fence), args)
                MySQLFlows(cursor).settle(fresh)
        return {int(row[0]) for row in rows}

    def _release_members(self, leases: Sequence[Lease]) -> set[int]:
        """Give back members' claims (those whose cancellation is pending end
        cancelled, with their bookkeeping): the ids given back."""
        return self._retry_contention(functools.partial(self._release_members_once, leases))

    def _release_members_once(self, leases: Sequence[Lease]) -> set[int]:
        fence, args = lease_pairs(len(leases)), _flat(leases)
        with self._transaction() as cursor:
            cursor.execute(LOCK_RELEASING.format(lease_pairs=fence), args)
            rows = cursor.fetchall()
            if rows:
                cursor.execute(RELEASE.format(lease_pairs=fence), args)
                MySQLFlows(cursor).settle([(int(row[2]), int(row[3]), JobStatus.CANCELLED)
                                           for row in rows if row[1]])
        return {int(row[0]) for row in rows}

    # -- members among the jobs a statement returns -----------------------------------------

    @staticmethod
    def _lock_members(cursor: Any, member_ids: Sequence[int], process_id: int) -> list[int]:
        """Lock the reserved members of a supervisor among these ids, before a
        statement that returns them: those it will change."""
        if not member_ids:
            return []
        cursor.execute(LOCK_RESERVED_MEMBERS.format(ids=placeholders(len(member_ids))),
                       (*member_ids, process_id))
        return [int(row[0]) for row in cursor.fetchall()]

    # -- a retry -----------------------------------------------------------------------------

    def _retry_members(self, job_ids: Sequence[int] | None, queue: str | None,
                       max_attempts: int | None, states: Sequence[str]) -> int:
        """Retry dead (or cancelled) members with their workflows' bookkeeping
        (Flows.retry_members), a bounded batch per transaction."""
        retried, after = 0, 0
        while True:
            count, after = self._retry_contention(functools.partial(
                self._retry_members_once, job_ids, queue, max_attempts, states, after))
            retried += count
            if job_ids is not None or not count:
                return retried

    def _retry_members_once(self, job_ids: Sequence[int] | None, queue: str | None,
                            max_attempts: int | None, states: Sequence[str],
                            after: int) -> tuple[int, int]:
        with self._transaction() as cursor:
            return MySQLFlows(cursor).retry_members(job_ids, queue, max_attempts, states, after)

    # -- what a Client asks --------------------------------------------------------------------

    def enqueue_workflow(self, plan: Plan, key: str | None = None) -> Enqueued:
        enqueued = self._retry_contention(functools.partial(self._enqueue_once, plan, key))
        self.ring(plan.ready_jobs())
        return enqueued

    def _enqueue_once(self, plan: Plan, key: str | None) -> Enqueued:
        with self._transaction() as cursor:
            return MySQLFlows(cursor).insert_plan(plan, key)

    def add_to_batch(self, batch_id: int, steps: Sequence[Step]) -> list[int]:
        with self._transaction() as cursor:
            job_ids, plan = MySQLFlows(cursor).add_members(batch_id, steps)
        self.ring(plan.ready_jobs())
        return job_ids

    def close_batch(self, batch_id: int) -> None:
        self._retry_contention(functools.partial(self._close_batch_once, batch_id))

    def _close_batch_once(self, batch_id: int) -> None:
        with self._transaction() as cursor:
            MySQLFlows(cursor).close_batch(batch_id)

    def workflow_progress(self, workflow_id: int) -> Progress | None:
        with self.conn.cursor() as cursor:
            return MySQLFlows(cursor).progress(workflow_id)

    def workflow_place(self, job_id: int) -> Place | None:
        with self.conn.cursor() as cursor:
            return MySQLFlows(cursor).place(job_id)


def _flat(leases: Sequence[Lease]) -> tuple[Any, ...]:
    return tuple(value for lease in leases for value in lease)
