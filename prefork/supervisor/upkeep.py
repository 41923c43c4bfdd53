"""The parent's own database work: lease extension, hand-backs of dead children's
jobs, lease recovery, the pool's one look for ready jobs, and the dashboard's
per-minute rollup (rollup.py counts, this writes it every heartbeat interval).

The connection is the parent's alone (children abandon their inherited copy).
When the database goes away, the parent carries on: the connection is
dropped and reopened later, and pending hand-backs wait for it.
"""
import logging
import os
import socket
import time
from datetime import datetime
from typing import (Any, Callable, Collection, Literal, NamedTuple, Optional, Sequence, TypeVar,
                    Union)

from .. import __version__
from ..errors import UserError
from ..jobs import Job, JobStatus, Lease, NewJob
from ..limits.declared import handled_types
from ..limits.rules import LimitRule
from ..logs import current_host_pid, error_class, event
from ..retry import RetryPolicy
from ..store import driver_errors, open_store
from ..store.contract import QueueFigures, Store
from ..store.registry_rows import Published
from ..store.views import MinuteCounts
from ..worker.parent_pulse import ParentPulse
from .children import ChildProcess, RunningJob
from .heartbeat import HeartbeatWatch, children_text
from .holders import holder_still_runs
from .limits import SupervisorLimits
from .rollup import Rollup
from .strays import StrayChecks, spare

RETRY_INTERVAL = 1.0        # seconds between reconnection attempts
RECOVERY_INTERVAL_CAP = 30.0
RESULTS_EXPIRED_BATCH = 1000   # expired results cleared per recovery pass, at most

Result = TypeVar("Result")
# Why we wrote a job's completion when its child was forked with it (leases.py too).
FORKED_PER_JOB = "forked per job"
HANDED = "claimer = supervisor"   # why we write the completions of the jobs we hand


class HandBack(NamedTuple):
    """A dead child's job, to return to the queue."""
    lease: Lease
    cause: str
    charge: bool   # does the death count against the job?


def error_text(exc: BaseException) -> str:
    """A driver error's class and, when it has one, the server's error number (1406:
    data too long, 1142: command denied); never its message."""
    code = exc.args[0] if exc.args else None
    return f"{error_class(exc)} {code}" if isinstance(code, int) else error_class(exc)


def say_if_newer(newer: Sequence[int]) -> None:
    """A newer release migrated the schema (these versions): we run on it, as in a rolling
    upgrade, and say so."""
    if newer:
        event("schema_newer", level=logging.WARNING, version=newer[-1], release=__version__)


def _log_completions(jobs: Sequence[RunningJob], completed: Collection[int],
                     why: Optional[str]) -> None:
    """Log completions written by us, for why (None: the caller logs them)."""
    if why is None:
        return
    for job in jobs:
        completed_now = job.lease.job_id in completed
        event("job_completed_by_supervisor" if completed_now else "job_lease_lost",
              job_id=job.lease.job_id, type=job.type, why=why)


def published(config: Any) -> Published:
    """What the registry row says of us beside the heartbeat: the job types handled
    here (limits.declared.handled_types) and the heartbeat interval."""
    return Published.of(handled_types(), config.heartbeat_interval)


class Upkeep:
    def __init__(self, config: Any, pulse: ParentPulse) -> None:
        self.config = config
        self.pulse = pulse   # what the children see of our heartbeat and lease extension
        store = open_store(config)   # errors here stop the start, before any fork
        say_if_newer(store.check_schema())
        self.store: Optional[Store] = store   # None while the database is away
        self.retry_at = 0.0
        self.pending_hand_backs: list[HandBack] = []
        self.handed_back_dead = 0   # jobs a worker's death sent to dead (poison, out of attempts)
        self.next_recover_at = self.next_beat_at = self.next_control_at = 0.0
        self.process_id = 0   # our id in the process registry once registered (ids start at 1)
        self.rollup = Rollup()
        self.next_rollup_at = 0.0   # monotonic
        self.limits = SupervisorLimits()   # the limits in force here (limits.py)
        self.wakeup_address = ""   # the UDP address we listen on for rings ("": none)
        self.strays = StrayChecks()   # after a reconnection (strays.py)
        self.reconnected = False   # since the loop last looked: children may boot again
        self.heartbeat = HeartbeatWatch(time.monotonic())   # holding: take no new jobs
        self.last_error = ""   # why the last database call failed (heartbeat_failing says it)
        self.publish_due = False   # after a reload: the row's job types and interval are old

    def reconfigure(self, config: Any) -> None:
        if config.dsn != self.config.dsn:
            self.close()
        self.config = config
        self.limits.declared()   # a reload's: published on the next pass
        self.publish_due = True   # and in the registry, with the next heartbeat

    def connection_id(self) -> Optional[int]:
        getter = getattr(self.store, "connection_id", None)
        return getter() if getter else None

    # -- duties --------------------------------------------------------------------

    def ready_count(self, limit: int) -> int:
        """Jobs ready in our queues (at most limit); 0 when the database is away."""
        return self._with_store(lambda store: store.ready_count(self.config.queues, limit)) or 0

    def limited_ready(self, limit: int) -> int:
        """Due limited jobs in our queues (at most limit per queue); 0 when the database
        is away."""
        return self._with_store(lambda store: store.limited_ready(self.config.queues,
                                                                  limit)) or 0

    def publish_limits(self, rules: Sequence[LimitRule], handled_types: Sequence[str]) -> bool:
        """Publish the limits in force here (store.publish_limits); False when the
        database is away."""
        return self._with_store(lambda store: store.publish_limits(rules, handled_types)) \
            is not False

    def limits_when_due(self, now: float, children: Sequence[ChildProcess]) -> None:
        """Publish the limits when due; once a poll, wake a child for limited work."""
        self.limits.tick(now, self, children, self.config.poll_interval)

    def queue_stats(self, queues: Sequence[str]) -> Optional[dict[str, QueueFigures]]:
        """Depth and oldest ready age of these queues (store.queue_stats); None when the
        database is away."""
        if not queues:
            return {}
        return self.read(lambda store: store.queue_stats(queues))

    def cancel_requested(self) -> Optional[set[int]]:
        """Ids of our reserved jobs with a cancellation pending; None when the database
        is away."""
        return self.read(lambda store: store.cancel_requested(self.process_id))

    def finish_cancelled(self, lease: Lease) -> Optional[bool]:
        """End a killed child's cancelled job as cancelled (store.finish_cancelled);
        None when the database is away."""
        return self.read(lambda store: store.finish_cancelled(lease))

    def read(self, action: Callable[[Store], Result]) -> Optional[Result]:
        """action(store); None when the database is away. In a tuple on the way: a
        store's own False (finish_cancelled's lost lease) is no outage."""
        answer = self._with_store(lambda store: (action(store),))
        return None if answer is False else answer[0]

    def extend(self, leases: Sequence[Lease]) -> bool:
        """Extend these leases; False when the database is away."""
        held = self._with_store(lambda store: store.extend_many(leases, self.config.lease_seconds))
        if held is not False and held < len(leases):
            event("leases_not_extended", level=logging.WARNING, count=len(leases) - held)
        return held is not False

    def complete(self, jobs: Sequence[RunningJob], why: Optional[str]) -> Optional[set[int]]:
        """Complete a child's jobs that ran to success on its behalf: the ids
        completed, or None when the database is away. Logged as written by us, for
        why, unless why is None (the caller logs them)."""
        completed = self._with_store(lambda store: store.complete_many(
            [job.lease for job in jobs]))
        if completed is False:
            return None
        _log_completions(jobs, completed, why)
        return set(completed)

    def complete_and_claim(self, jobs: Sequence[RunningJob], count: int,
                           why: Optional[str] = FORKED_PER_JOB
                           ) -> Optional[tuple[set[int], list[Job]]]:
        """Complete the children's jobs that ran to success, and claim up to count
        jobs to hand to children, in one round trip: (ids completed, jobs claimed),
        or None when the database is away. The claims are in our name (host:pid):
        the child that runs a job may be forked after its claim."""
        config = self.config
        leases = [job.lease for job in jobs]
        answer = self._with_store(lambda store: store.complete_and_claim(
            leases, config.queues, current_host_pid(), config.lease_seconds,
            process_id=self.process_id, limit=count) if count else (store.complete_many(leases), []))
        if answer is False:
            return None
        _log_completions(jobs, answer[0], why)   # why None: the caller logs them
        return set(answer[0]), answer[1]

    def hand_back(self, lease: Lease, cause: str, charge: bool) -> None:
        """Return a dead child's job; kept and retried while the database is away."""
        self.pending_hand_backs.append(HandBack(lease, cause, charge))
        self.flush_hand_backs()

    def flush_hand_backs(self) -> None:
        policy = RetryPolicy.from_config(self.config)
        while self.pending_hand_backs:
            lease, cause, charge = self.pending_hand_backs[0]
            status = self._with_store(lambda store: store.hand_back(
                lease.job_id, lease.token, cause, policy, self.config.max_crashes, charge=charge))
            if status is False:
                return
            self.pending_hand_backs.pop(0)
            self.rollup.handed_back(lease.job_id, status)
            if status:
                self.handed_back_dead += status == JobStatus.DEAD
                event("job_handed_back", job_id=lease.job_id, status=status, cause=cause,
                      charged=charge)

    def strays_when_due(self, now: float, children: Sequence[ChildProcess]) -> None:
        """After a reconnection, give back at once the jobs reserved in our name that
        no worker of ours holds (strays.py): a failover's, not to wait out a lease."""
        if not self.strays.due(now, self.config.heartbeat_interval):
            return
        kept = spare(children, [pending.lease.job_id for pending in self.pending_hand_backs],
                     self.config.heartbeat_interval)
        for process_id in self.strays.ids(self.process_id):
            returned = self._with_store(lambda store: store.hand_back_strays(process_id, kept))
            if returned:
                event("jobs_handed_back_after_reconnect", process_id=process_id,
                      count=len(returned), job_ids=returned)

    def recover_when_due(self, now: float) -> None:
        """Return expired leases (a host that vanished) and clear a batch of expired
        results (never read once expired: this keeps their rows small) every half
        lease, at most 30 s."""
        if now < self.next_recover_at:
            return
        self.next_recover_at = now + min(RECOVERY_INTERVAL_CAP, self.config.lease_seconds / 2)
        recovered = self._with_store(lambda store: store.recover_expired())
        if recovered:
            event("leases_recovered", count=recovered)
        expired = self._with_store(lambda store: store.expire_results(RESULTS_EXPIRED_BATCH))
        if expired:
            event("results_expired", count=expired)

    def enqueue(self, new_job: NewJob) -> Union[int, Literal[False]]:
        """Enqueue a job (a schedule's tick); its id, or False when the database is away."""
        return self._with_store(lambda store: store.enqueue(new_job))

    def write_rollup_when_due(self, now: float) -> None:
        """Every heartbeat interval, write the rollup's rows counted since the last write
        (the minute under way too: the dashboard's last hour and charts show a job
        seconds after it ends); what a failed write kept waits for the next."""
        if now < self.next_rollup_at:
            return
        self.next_rollup_at = now + self.config.heartbeat_interval
        self._write_rollup(self.rollup.unsaved())

    def flush_rollup(self) -> None:
        """At a clean stop: write every count not yet written (one try, reconnecting at
        once if need be); log what could not be written."""
        self.retry_at = 0.0
        due = self.rollup.unsaved()
        if not self._write_rollup(due):
            event("rollup_unwritten", level=logging.WARNING, jobs=sum(
                row.done + row.failed for rows in due.values() for row in rows))

    def _write_rollup(self, due: dict[int, list[MinuteCounts]]) -> bool:
        """Write counts by process id, forgetting each once written; False when the
        database failed (the rest stay for the next write)."""
        host = socket.gethostname()
        for process_id, counts in due.items():
            if self._with_store(lambda store: store.write_minutes(
                    process_id, host, counts)) is False:
                return False
            self.rollup.written(process_id, counts)
        return True

    # -- the registry and control of many hosts ---------------------------------------

    def register(self, workers: int) -> None:
        """Join the process registry at start; errors here stop the start."""
        assert self.store is not None, "connected when constructed"
        self._join(self.store, workers)
        self.heartbeat.succeeded(time.monotonic())   # the row is as fresh as a heartbeat
        self.pulse.extended(time.monotonic())   # nothing is held yet: all is extended
        self.limits.publish_when_due(self)   # before any child's first claim

    def _join(self, store: Store, workers: int) -> None:
        """Join the process registry (at start, and again after others pruned us)."""
        if self.process_id:   # again: what the server holds under the old id is checked
            self.strays.rejoined(self.process_id)
        started = time.monotonic()
        self.process_id = store.register_process(
            socket.gethostname(), os.getpid(), self.config.queues, workers, __version__,
            published(self.config))
        self.publish_due = False
        self.pulse.beat(started)   # a first heartbeat, for the children (worker/parent_pulse.py)
        listening: dict[str, Any] = {}   # Any: never taken for `level`
        if self.wakeup_address:   # under this id: a rejoin publishes it again
            store.publish_wakeup(self.process_id, self.wakeup_address)
            listening = {"wakeup_address": self.wakeup_address}
        event("supervisor_registered", process_id=self.process_id, **listening)

    def beat_when_due(self, now: float, workers: int, children_json: Callable[[], str]) -> bool:
        """Heartbeat and prune silent supervisors. True when others had pruned us and
        we joined again under a new id: the caller must replace its children, whose
        claims carry the old one. children_json() describes the children, only when a
        beat is due (the main loop runs many times a second)."""
        if now < self.next_beat_at:
            return False
        described = children_text(children_json())
        beat = self._with_store(lambda store: "alive" if store.heartbeat(
            self.process_id, self.config.queues, workers, described) else "pruned")
        if beat == "alive":
            self.pulse.beat(now)
            self.publish_when_due()
        for process_id, jobs in self._with_store(lambda store: store.prune_silent(
                self.config.supervisor_timeout, spare=holder_still_runs)) or []:
            event("supervisor_pruned", level=logging.WARNING, process_id=process_id,
                  jobs_handed_back=jobs)
        rejoined = False
        if beat == "pruned":
            event("supervisor_rejoined", level=logging.WARNING, old_process_id=self.process_id)
            rejoined = self._with_store(lambda store: self._join(store, workers)) is not False
        self.next_beat_at = now + self.heartbeat.record(now, beat == "alive" or rejoined,
                                                        self.config, self.last_error)
        return rejoined

    def publish_when_due(self) -> None:
        """After a reload, put its job types and interval in our row (again on the next
        heartbeat while the database is away)."""
        if self.publish_due and self._with_store(
                lambda store: store.publish(self.process_id, published(self.config))) is not False:
            self.publish_due = False

    def control_when_due(self, now: float
                         ) -> Optional[tuple[datetime, Optional[datetime], Any]]:
        """(database now, restart request or None, paused queues) every poll interval,
        else None."""
        if now < self.next_control_at:
            return None
        self.next_control_at = now + self.config.poll_interval
        state = self._with_store(lambda store: store.control_state(socket.gethostname()))
        return state or None

    def leave(self) -> None:
        """Mark us stopped in the registry after a clean drain."""
        self._with_store(lambda store: store.stop_process(self.process_id))

    # -- the connection ------------------------------------------------------------------

    def _with_store(self, action: Callable[[Store], Result]) -> Union[Result, Literal[False]]:
        """Run action(store); False when the database is away."""
        if self.store is None:
            if time.monotonic() < self.retry_at:
                return False
            try:
                self.store = open_store(self.config)
            except (UserError,) + driver_errors() as exc:
                self.retry_at = time.monotonic() + RETRY_INTERVAL
                self.last_error = str(exc) if isinstance(exc, UserError) else error_text(exc)
                event("supervisor_db_unavailable", level=logging.WARNING, error=self.last_error)
                return False
            self.strays.reconnected()   # maybe to another server: it may hold strays
            self.reconnected = True
        try:
            return action(self.store)
        except driver_errors() as exc:
            self.last_error = error_text(exc)
            event("supervisor_db_error", level=logging.WARNING, error=self.last_error)
            self.close()
            self.retry_at = time.monotonic() + RETRY_INTERVAL
            return False

    def abandon(self) -> None:
        """In a forked child: forget the connection without ending the parent's session."""
        if self.store is not None:
            self.store.abandon()
            self.store = None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
