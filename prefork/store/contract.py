"""The store contract: every state change a job can go through.

The worker, the supervisor and the CLI use only these methods, so they do
not know which database is behind them. Each dialect keeps all of its SQL to
itself, by name (store/<dialect>/queries.py). Every state change is one
guarded statement or one transaction, and the methods that can lose a race
say so in their result.
"""
import abc
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from importlib import resources
from typing import Any, ContextManager

from ..cancellation import CancelReport
from ..jobs import Job, JobStatus, Lease, NewJob
from ..limits.rules import LimitRule, LimitUsage
from ..retry import RetryPolicy
from ..wakeups import doorbell, remote
from .processes import SupervisorRegistry
from .processes import spare_none as spare_none   # prune_silent()'s default
from .strays import HeldJob as HeldJob   # prune_silent's too
from .strays import StrayHandBack
from .workflow_contract import WorkflowStore
from .workflow_contract import members_apart as members_apart   # the stores' parts use it
from .workflow_views import WorkflowViews
from .views import JobFilter, JobPage, MinuteCounts, MinutePoint, QueueOverview
from .views import JobRow as JobRow   # a job as get() and dead_jobs() return it

# last_error of the jobs a vanished supervisor's children held.
SILENT_SUPERVISOR_ERROR = "supervisor vanished"

# A row of a claim's read: id, job_type, queue, payload, attempts (before the
# claim), max_attempts, idempotency_key, crashes.
ClaimedRow = Sequence[Any]

# queue_stats() of one queue: "ready", "delayed", "reserved", "dead", "cancelled", "waiting"
# (counts) and "oldest_ready_age" (seconds the oldest due job has waited; 0.0: none).
QueueFigures = dict[str, float]

# status(): (running supervisors as dicts, live counts [(queue, status, due,
# count, oldest age s)], {queue: done in the window}, paused queues).
StatusRows = tuple[list[dict[str, Any]], list[tuple[Any, ...]], dict[str, int], set[str]]


def claimed_job(row: ClaimedRow, token: str, store: "Store") -> Job:
    """The Job a claim hands out, from a claim's row read before the reservation."""
    job_id, job_type, queue, payload, attempts, max_attempts, key, crashes = row
    return Job(id=job_id, type=job_type, queue=queue, payload_text=payload,
               attempt=attempts + 1, max_attempts=max_attempts, idempotency_key=key,
               lease_token=token, crashes=crashes, _store=store)


def queue_figures(queues: Sequence[str],
                  rows: Sequence[Sequence[Any]]) -> dict[str, QueueFigures]:
    """queue_stats()'s answer from rows of (queue, status, jobs, due jobs, oldest due age s)."""
    figures: dict[str, QueueFigures] = {queue: _no_figures() for queue in queues}
    for queue, status, jobs, due, oldest_due_age in rows:
        counts = figures[queue]
        counts[JobStatus(status).value] = int(jobs)
        if status == JobStatus.READY:   # the due ones: those not due yet are delayed
            counts[JobStatus.READY.value] = int(due)
            counts["delayed"] = int(jobs) - int(due)
            counts["oldest_ready_age"] = max(0.0, float(oldest_due_age or 0))
    return figures


def _no_figures() -> QueueFigures:
    figures: QueueFigures = {status.value: 0 for status in
                             (JobStatus.READY, JobStatus.RESERVED, JobStatus.DEAD,
                              JobStatus.CANCELLED, JobStatus.WAITING)}
    figures.update(delayed=0, oldest_ready_age=0.0)
    return figures


def packaged_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """[(version, name, sql)] from the packaged schema/<dialect>/NNNN_name.sql files, in order."""
    folder = resources.files("prefork") / "schema" / dialect
    found = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return found


# abc.ABCs, one part of the contract each: strays.py, processes.py,
# workflow_contract.py and outcomes.py (the workflows' base), workflow_views.py.
class Store(StrayHandBack, SupervisorRegistry, WorkflowStore, WorkflowViews):
    # What names this database for wake-ups (see doorbell.py and wakeups/remote.py).
    bell_key: str | None = None

    def ring(self, new_jobs: Sequence[NewJob]) -> None:
        """After new jobs committed: wake the idle supervisors of their queues now, this
        host's through the doorbell, others' that listen over UDP (their addresses
        read from the registry at most every few seconds)."""
        if self.bell_key:
            # One job's counts without a Counter: a one-job enqueue rings at every call.
            counts = {new_jobs[0].queue: 1} if len(new_jobs) == 1 else \
                Counter(job.queue for job in new_jobs)
            doorbell.ring(self.bell_key, counts)
            remote.ring(remote.peers(self.bell_key, self.wakeup_peers), counts)

    @abc.abstractmethod
    def publish_wakeup(self, process_id: int, address: str) -> None:
        """Record in a supervisor's registry row the UDP address it listens on for
        wake-ups (wakeups/udp.py)."""

    @abc.abstractmethod
    def wakeup_peers(self) -> Sequence[Sequence[Any]]:
        """(wakeup address, queues joined by ",") of each running supervisor that
        listens for wake-ups (one read of the few running rows)."""

    # -- schema -------------------------------------------------------------
    @abc.abstractmethod
    def migrate(self) -> list[int]:
        """Apply missing schema versions; safe to run twice or from two hosts at once.
        Returns the list of versions applied now."""

    @abc.abstractmethod
    def check_schema(self) -> list[int]:
        """Raise UserError unless the schema is present and current; versions newer than ours."""

    # -- producing ----------------------------------------------------------
    @abc.abstractmethod
    def enqueue(self, new_job: NewJob) -> int:
        """Insert a NewJob; the same (queue, key) returns the existing job's id."""

    @abc.abstractmethod
    def enqueue_many(self, new_jobs: Sequence[NewJob]) -> int:
        """Insert many NewJobs in one statement; returns how many rows were new."""

    # -- the job life cycle (fenced by the lease token) ---------------------
    @abc.abstractmethod
    def claim(self, queues: Sequence[str], worker: str, lease_seconds: float, limit: int = 1,
              process_id: int | None = None) -> list[Job]:
        """Reserve up to `limit` ready jobs and commit before returning them.

        Queues are tried in order; paused queues are skipped. Each job gets
        attempts+1, a fresh random lease token, a lease deadline, the worker
        (host:pid) and its supervisor's registry id.
        """

    @abc.abstractmethod
    def ready_count(self, queues: Sequence[str], limit: int) -> int:
        """How many jobs of these queues could be claimed now (at most `limit` per queue)."""

    # (Completions and failures, with what they leave behind: outcomes.py.)

    @abc.abstractmethod
    def release(self, job: Job) -> bool:
        """Give back a claimed job that never started, restoring its attempt."""

    @abc.abstractmethod
    def release_many(self, jobs: Sequence[Job]) -> set[int]:
        """release() of a worker's held batch in one transaction: the ids given back."""

    @abc.abstractmethod
    def extend(self, job: Job, lease_seconds: float) -> bool:
        """Push the lease deadline out while the handler runs. False if the lease was lost."""

    @abc.abstractmethod
    def extend_many(self, leases: Sequence[Lease], lease_seconds: float) -> int:
        """extend() for many leases in one statement; returns how many are still ours:
        extended now, or done already under that lease (a child may have written a
        completion while the parent extended it)."""

    @abc.abstractmethod
    def hand_back(self, job_id: int, lease_token: str, cause: str, policy: RetryPolicy,
                  max_crashes: int, charge: bool = True) -> JobStatus | None:
        """Return the job of a worker that died of `cause` (e.g. "SIGKILL") while holding it,
        without waiting for its lease; last_error says "worker died: <cause>" (also
        appended to the error history when the death is charged).

        charge=True: the death counts against the job (a crash and a used
        attempt): ready after backoff, or dead when out of attempts or when it
        has now crashed `max_crashes` workers. charge=False (the supervisor
        stopped the worker): ready now with the attempt restored.
        No lease check: the token proves nobody else took the job. Returns the
        new status, or None when the token no longer matches.
        """

    @abc.abstractmethod
    def recover_expired(self, limit: int = 100) -> int:
        """Return jobs with expired leases to ready (dead when out of attempts).
        Handles at most `limit` jobs; returns how many."""

    # -- limits (prefork/limits) -----------------------------------------------
    @abc.abstractmethod
    def publish_limits(self, rules: Sequence[LimitRule], handled_types: Sequence[str]) -> None:
        """Record the rules in prefork_limits (one row per type, replaced), delete the
        rows of `handled_types` that have no rule now, and set `limited` on the live
        (ready and reserved) jobs of the types whose rule appeared, clear it on those
        whose rule went: jobs enqueued before a limit existed obey it too."""

    @abc.abstractmethod
    def claim_limited(self, queues: Sequence[str], worker: str, lease_seconds: float,
                      limit: int, process_id: int | None,
                      job_types: Collection[str]) -> tuple[list[Job], float | None]:
        """Reserve up to `limit` due limited jobs of these queues and types, in claim
        order, that their groups have room for under the rules in prefork_limits (read
        in this transaction: one per type, whatever the claimer declares); it locks each
        group it starts jobs of, skips those others hold and paused queues. ([Job],
        seconds until a rate-starved group's next token or None)."""

    @abc.abstractmethod
    def limited_ready(self, queues: Sequence[str], limit: int) -> int:
        """How many due limited jobs these queues hold, at most `limit` per queue,
        whether or not their groups have room (the supervisor's look)."""

    @abc.abstractmethod
    def limit_usage(self) -> list[LimitUsage]:
        """Each group of a published rule with jobs running or waiting, by type and key."""

    # -- cancellation (prefork/cancellation.py) -----------------------------------
    @abc.abstractmethod
    def cancel(self, job_ids: Sequence[int]) -> CancelReport:
        """Cancel these jobs: ready (delayed too) ones become cancelled at once; running
        ones get cancel_requested_at (their supervisor stops them); finished ones are
        left alone. One transaction."""

    @abc.abstractmethod
    def cancel_matching(self, queue: str | None, job_type: str | None) -> CancelReport:
        """cancel() of every not yet finished job of this queue and/or type (at least
        one of them given), in bounded batches."""

    @abc.abstractmethod
    def cancel_requested(self, process_id: int) -> set[int]:
        """Ids of the reserved jobs of this supervisor whose cancellation is pending
        (read through the cancel index: nothing when none is)."""

    @abc.abstractmethod
    def finish_cancelled(self, lease: Lease) -> bool:
        """End a reserved job as cancelled (finished_at now, cancel_requested_at
        cleared, last_error "cancelled"): its worker stopped on JobCancelled, or its
        supervisor killed the worker that ran it. Fenced by the token only, as
        release() is; False when the token no longer matches."""

    # -- inspection and repair ----------------------------------------------
    @abc.abstractmethod
    def get(self, job_id: int) -> JobRow | None:
        """One job (payload included), or None."""

    @abc.abstractmethod
    def dead_jobs(self, queue: str | None = None, limit: int = 100) -> list[JobRow]:
        """Dead jobs without payloads, newest first."""

    @abc.abstractmethod
    def retry_dead(self, job_ids: Sequence[int] | None = None, queue: str | None = None,
                   max_attempts: int | None = None,
                   statuses: Sequence[JobStatus] = (JobStatus.DEAD,)) -> int:
        """Put dead jobs (or those in any of `statuses`: dead and cancelled) back to
        ready with attempts reset (all of them when job_ids is None), and
        max_attempts set to this when given. Their error history stays. Returns how many."""

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """{status: number of jobs} (a whole-table count: tests and small tables)."""

    @abc.abstractmethod
    def queue_stats(self, queues: Sequence[str]) -> dict[str, QueueFigures]:
        """{queue: {"ready", "delayed", "reserved", "dead": counts, "oldest_ready_age":
        seconds the oldest due job has waited (0.0: none)}} for each of `queues` ({}
        for none). Reads only the claim index's non-done ranges: never a done row."""

    # -- operating many hosts (control, status; the registry is in processes.py) -----
    @abc.abstractmethod
    def control_state(self, host: str) -> tuple[datetime, datetime | None, set[str]]:
        """(database now, newest restart request for this host or None, paused queues)."""

    @abc.abstractmethod
    def request_restart(self, host: str, at: datetime | None = None) -> datetime:
        """Ask supervisors on `host` ('*': all) to replace children started before
        `at` (default: now, by the database's clock); returns the request time."""

    @abc.abstractmethod
    def set_paused(self, queue: str, paused: bool) -> None:
        """Pause (no host claims it) or resume a queue."""

    @abc.abstractmethod
    def status(self, done_window_seconds: float = 3600) -> StatusRows:
        """(running supervisors as dicts, live counts [(queue, status, due, count,
        oldest age s)], {queue: done in the window}, paused queues). Never reads
        done rows outside the window."""

    @abc.abstractmethod
    def count_finished(self, status: JobStatus, older_than_seconds: float) -> int:
        """How many `status` (done/dead) jobs finished longer ago than that."""

    @abc.abstractmethod
    def prune_finished(self, status: JobStatus, older_than_seconds: float,
                       batch: int = 1000) -> int:
        """Delete one bounded batch of them, oldest first; returns how many."""

    @abc.abstractmethod
    def prune_processes(self, older_than_seconds: float, batch: int = 1000) -> int:
        """Delete registry rows of supervisors stopped or pruned that long ago, and the
        rollup's rows of minutes that long ago (in batches); how many rows of both."""

    # -- the dashboard's reads and the per-minute rollup (views.py) ----------------------
    @abc.abstractmethod
    def queue_overview(self) -> list[QueueOverview]:
        """Every known queue (with live jobs, paused or resumed once, or in the rollup of
        the last hour), by name: live counts from the claim index's ranges, the last
        hour from the rollup. Never reads a done row."""

    @abc.abstractmethod
    def throughput(self, since: datetime, queue: str | None = None) -> list[MinutePoint]:
        """The rollup's minutes from `since` (naive UTC) on, oldest first, summed over
        hosts and job types (of one queue, or all)."""

    @abc.abstractmethod
    def find_jobs(self, job_filter: JobFilter, after_id: int | None, limit: int) -> JobPage:
        """Up to `limit` jobs matching the filter with ids below after_id (None: from the
        newest), newest first, without payloads: keyset paging, each filter read
        through an index (store/job_search.py). A job that matches all along is on
        exactly one page however jobs change between pages. UserError for a limit
        outside 1 to views.MAX_PAGE."""

    @abc.abstractmethod
    def write_minutes(self, process_id: int, host: str, counts: Sequence[MinuteCounts]) -> None:
        """Upsert one supervisor's rollup rows in one statement: each row's counts
        replace those written before for its (minute, queue, type, process), so a
        repeated write changes nothing."""

    @abc.abstractmethod
    def discard_dead(self, job_ids: Sequence[int]) -> int:
        """Delete these jobs if they are dead; returns how many."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection (only in the process that opened it)."""

    def abandon(self) -> None:
        """In a forked child: forget the parent's connection without closing it
        politely (a polite close would end the session the parent still uses)."""
