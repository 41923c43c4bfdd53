"""The mysql dialect: what the MySQL store does differently when it speaks only
what the MySQL 8.0 and 8.4 reference manuals document (its statements are in
portable_queries.py; everything not overridden here is the same for both
dialects). A part of PortableMySQLStore (store.py), before the parts it overrides.

A claim is a transaction of two round trips instead of one script: a locking
read that returns the ids of the next ready jobs (skipping locked rows), then
the reservation of those ids and their read-back, committed. A group completion
needs no locking read at all: it marks done what is still ours, then reads which
jobs are done under the group's leases.
"""
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...config import Config
from ...jobs import Job, Lease
from ..contract import claimed_job
from .completion_queries import BOUND_SILENCE_AND_BEGIN, COMMIT_AND_UNBOUND_SILENCE
from .due import Target, target_args
from .due_queries import levels
from .lifecycle import Claimant, MySQLLifeCycle
from .operations import MySQLOperations
from .portable_queries import (
    COMPLETE_LEASED,
    DONE_UNDER_LEASES,
    LOCK_NEXT_READY_IDS,
    READ_BACK_IDS,
    REQUEST_RESTART,
    RESERVE_IDS,
    SET_PAUSED,
)
from .queries import (
    COMMIT,
    RESTART_REQUESTED,
    START_TRANSACTION,
    lease_pairs,
    placeholders,
    script,
)
from .session import Row, idle_seconds, micros


class MySQLPortable(MySQLLifeCycle, MySQLOperations):
    """The parts of the MySQL store that the mysql dialect does its own way."""
    config: Config

    def _run_claim(self, leases: Sequence[Lease], target: Target, limit: int,
                   claimant: Claimant) -> tuple[set[int], list[Job]]:
        return self._retry_contention(lambda: self._claim_once(leases, target, limit, claimant))

    def _claim_once(self, leases: Sequence[Lease], target: Target, limit: int,
                    claimant: Claimant) -> tuple[set[int], list[Job]]:
        """One transaction: complete `leases` (if any) and claim up to `limit` jobs
        of one target; (ids of the jobs done under the leases, [Job])."""
        lock = LOCK_NEXT_READY_IDS.format(levels=levels(len(target.priorities)))
        first = [START_TRANSACTION, *_completion(leases), lock]
        try:
            *done, ready = self._script_results(
                script(*first), (*_flat_twice(leases), *target_args(target), limit))
            ids = [row[0] for row in ready]
            if ids:
                rows = self._reserve(ids, claimant)
            else:
                rows = []
                self.conn.commit()
        except BaseException:
            self._rollback_quietly()   # _retry_contention retries what is contention
            raise
        completed = {row[0] for row in done[0]} if done else set()
        return completed, [claimed_job(row[:-1], row[-1], self) for row in rows]

    def _reserve(self, ids: list[int], claimant: Claimant) -> list[Row]:
        """Reserve the locked jobs `ids`, read them back and commit: their rows."""
        worker, lease_seconds, process_id = claimant
        listed = placeholders(len(ids))
        reserve = script(RESERVE_IDS.format(ids=listed), READ_BACK_IDS.format(ids=listed), COMMIT)
        secret = secrets.token_hex(16)
        args = (secret, micros(lease_seconds), worker, process_id, *ids, *ids, secret)
        (rows,) = self._script_results(reserve, args)
        return rows

    def _complete_plain(self, leases: Sequence[Lease]) -> set[int]:
        if not leases:
            return set()
        # Autocommitted: marking done what is still ours can be repeated safely.
        (done,) = self._retry_contention(
            lambda: self._script_results(script(*_completion(leases)), _flat_twice(leases)))
        return {row[0] for row in done}

    completion_start, completion_end = BOUND_SILENCE_AND_BEGIN, COMMIT_AND_UNBOUND_SILENCE
    completion_undo = None   # the commit undid the start

    def _completion_start_args(self) -> tuple[Any, ...]:
        # MySQL has no idle_transaction_timeout (see session.py): a short wait_timeout
        # for the span of the handler's transaction ends it should this host vanish.
        return (idle_seconds(self.config.lease_seconds),)

    def request_restart(self, host: str, at: datetime | None = None) -> datetime:
        self._rowcount(REQUEST_RESTART, (host, at, at))
        requested_at: datetime = self._one(RESTART_REQUESTED, (host,))[0]
        return requested_at

    def set_paused(self, queue: str, paused: bool) -> None:
        flag = 1 if paused else 0
        self._rowcount(SET_PAUSED, (queue, flag, flag))


def _completion(leases: Sequence[Lease]) -> list[str]:
    """The statements that complete a group of leases and read which are done
    under them; none for no leases."""
    if not leases:
        return []
    fence = lease_pairs(len(leases))
    return [COMPLETE_LEASED.format(lease_pairs=fence), DONE_UNDER_LEASES.format(lease_pairs=fence)]


def _flat_twice(leases: Sequence[Lease]) -> tuple[Any, ...]:
    """The parameters of _completion(): each statement's fence, id, token of each lease."""
    flat = tuple(value for lease in leases for value in lease)
    return flat + flat
