"""The pool of children: fork them, reap them, stop or kill them, keep their
number at the target, replace them (one at a time for a reload or restart; a
recycled child once its successor is up, within a bound of spares), and back
off when they fail to start.

What to do is decided in decisions.py; this module does it.
"""
import json
import logging
import os
import random
import signal
import time
from datetime import datetime
from typing import Any, Callable, Iterator, Optional, Sequence

from .. import registry
from ..jobs import Job, utc_now
from ..logs import event
from ..process_signals import BLOCKED_ACROSS_FORK, preexec_die_with_parent
from ..worker.parent_pulse import ParentPulse
from . import child as child_module, decisions
from .cancels import Cancels
from .children import ChildProcess, Deadline


class Pool:
    def __init__(self, config: Any, forget_parent: Callable[[], None],
                 claim_for_children: Callable[[int], list[Job]],
                 hands_jobs: Callable[[], bool]) -> None:
        self.config = config
        # Claims up to N jobs to hand to the children about to be forked (none unless
        # they are forked per job: leases.complete_and_claim).
        self.claim_for_children = claim_for_children
        # Do we claim for the children forked now, for as long as they live, and hand
        # them their jobs (decisions.supervisor_claims)?
        self.hands_jobs = hands_jobs
        # In a new child, right after fork: drop the parent's resources besides ours.
        self.forget_parent = forget_parent
        self.children: dict[int, ChildProcess] = {}
        self.generation = 0           # children of an older one are replaced
        self.restart_failures = 0     # failed starts in a row
        self.next_spawn_at = 0.0
        self.restart_applied: Optional[datetime] = None   # the newest restart request acted on
        self.cancels = Cancels()   # running jobs cancelled: children told, killed past the grace
        # The DSN whose schema is known to be current, so that a new child need not
        # read it again: the parent's Upkeep checked it before the first fork. A
        # child the database failed forgets it (the schema may be gone), until a
        # child that checked it again is up.
        self.schema_known_for: Optional[str] = config.dsn
        # Each child's request for SIGQUIT at our death, prepared once here.
        self.die_with_parent = preexec_die_with_parent(signal.SIGQUIT)
        # Our heartbeat's and lease extension's last successes, as the children see them.
        self.pulse = ParentPulse()

    # -- who is who ----------------------------------------------------------------

    def wanted(self) -> list[ChildProcess]:
        """The children that make up the pool: not stopping, and not handing over to
        a successor (which counts in their place). A recycled child without one
        keeps its place until it has exited: only then is it replaced."""
        return [c for c in self.children.values() if c.successor is None
                and c.stop_cause in (None,) + decisions.RECYCLE_CAUSES]

    def waiting(self) -> list[ChildProcess]:
        """The children that claim for themselves and found nothing: to wake for work
        (a child handed its jobs never says it waits: we know what it holds)."""
        return [c for c in self.children.values() if c.waiting and not c.stopping]

    def probing(self) -> bool:
        """A trial child is starting after failed starts: wait for its verdict."""
        return bool(self.restart_failures) and any(not c.ready for c in self.wanted())

    def backoff_note(self, now: float) -> str:
        """For the title while children fail at start: when the next one starts."""
        if not self.restart_failures:
            return ""
        return f"restart backoff {max(0, self.next_spawn_at - now):.0f}s"

    def describe(self, now: float) -> str:
        """What each child does, as JSON for the registry (and `prefork-queue status`)."""
        return json.dumps([
            {"pid": c.pid, "slot": c.slot,
             "state": "stopping" if c.stopping else "busy" if c.job else "idle",
             "job_id": c.job and c.job.lease.job_id, "type": c.job and c.job.type,
             "seconds": c.job and round(now - c.job.since, 1)}
            for c in sorted(self.children.values(), key=lambda c: c.slot)])

    # -- spawn and reap --------------------------------------------------------------

    def spawn_many(self, process_id: int, predecessors: Sequence[Optional[ChildProcess]]
                   ) -> list[int]:
        """Fork a child for each predecessor (None: a new one in a free slot); their
        pids. Forked per job, each is handed a job claimed for them all at once."""
        jobs: list[Optional[Job]] = []
        if predecessors:
            jobs += self.claim_for_children(len(predecessors))
        jobs += [None] * (len(predecessors) - len(jobs))
        return [self.spawn(process_id, predecessor, job)
                for predecessor, job in zip(predecessors, jobs)]

    def spawn(self, process_id: int, predecessor: Optional[ChildProcess] = None,
              job: Optional[Job] = None) -> int:
        """Fork a child (the successor of predecessor, in its slot; else in a free
        slot), handed job when given; its pid."""
        slot = predecessor.slot if predecessor else self._free_slot()
        read_fd, write_fd = os.pipe()           # child -> parent: what it does
        wake_read_fd, wake_fd = os.pipe()       # parent -> child: work is ready
        control_read_fd, control_fd = os.pipe()  # parent -> child: its jobs cancelled
        max_items = self.config.max_items
        if max_items:
            max_items += random.randint(0, self.config.max_items_jitter)
        check_schema = self.config.dsn != self.schema_known_for
        handed = job is None and self.hands_jobs()
        spec = child_module.ChildSpec(slot, self.config, write_fd, wake_read_fd, os.getpid(),
                                      process_id, max_items, control_read_fd, check_schema,
                                      self.die_with_parent, self.pulse, job, handed)
        # Hold signals across fork: one arriving before the child has reset its
        # handlers would run our handler in the child's copy of us and be lost.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_ACROSS_FORK)
        pid = os.fork()
        if pid == 0:
            for other in self.children.values():
                other.close()
            self.forget_parent()
            child_module.run_child(spec)   # never returns; unblocks once its handlers are set
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        os.close(wake_read_fd)
        os.close(control_read_fd)
        os.set_blocking(read_fd, False)
        os.set_blocking(wake_fd, False)
        os.set_blocking(control_fd, False)
        child = ChildProcess(pid, slot, self.generation, read_fd, wake_fd, control_fd,
                             max_items)
        child.checked_schema_of = self.config.dsn if check_schema else None
        if job is not None:   # ours to give back until the child says it runs it
            child.held, child.parent_completes = (job.lease,), True
        child.handed = handed
        child.parent_completes |= handed
        self.children[pid] = child
        event("worker_spawned", pid=pid, slot=slot, generation=self.generation,
              **({"replaces": predecessor.pid} if predecessor else {}))
        return pid

    def _free_slot(self) -> int:
        used = {c.slot for c in self.children.values() if not c.stopping}
        return next(slot for slot in range(1, len(used) + 2) if slot not in used)

    def reap(self) -> Iterator[tuple[ChildProcess, int]]:
        """The children that exited, each with its wait status, taken out of the pool."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                if os.WIFEXITED(status) and os.WEXITSTATUS(status) == child_module.FATAL_EXIT:
                    self.schema_known_for = None
                yield child, status

    def back_off_restarts(self, cause: str) -> None:
        self.restart_failures += 1
        delay = decisions.restart_backoff(self.restart_failures, self.config.restart_backoff_cap)
        self.next_spawn_at = time.monotonic() + delay
        event("restart_backoff", level=logging.WARNING, failures=self.restart_failures,
              wait_s=round(delay, 2), reason=f"children fail at start ({cause})")

    def database_back(self) -> None:
        """Our own connection came back after a loss: children failing at start for
        want of a database may start now, not after the back-off grown meanwhile."""
        self.restart_failures, self.next_spawn_at = 0, 0.0

    # -- stop and kill -----------------------------------------------------------------

    def stop(self, child: ChildProcess, cause: str) -> None:
        """Ask a child to finish its job and exit (SIGTERM); after graceful_timeout it is
        killed and its job handed back without using an attempt."""
        if child.stop_cause is None:
            child.stop_cause = cause
            child.deadline = Deadline(time.monotonic() + self.config.graceful_timeout,
                                      "graceful timeout", False)
        child.send(signal.SIGTERM)

    def kill(self, child: ChildProcess, reason: str, signum: int = signal.SIGKILL,
             charge: bool = True) -> None:
        """Stop a child now. charge: does this count against the job it holds?"""
        child.stop_cause = child.stop_cause or reason
        child.kill_reason, child.charge_job = reason, charge
        child.send(signum)

    def enforce_deadlines(self, now: float) -> None:
        """Kill the children past their stop deadline or their job's hard timeout."""
        for child in list(self.children.values()):
            if child.deadline and now >= child.deadline.at:
                deadline, child.deadline = child.deadline, None
                self.kill(child, deadline.reason, charge=deadline.charge)
            elif child.job and not child.kill_reason:
                _, hard = registry.timeouts(child.job.type, self.config)
                if decisions.hard_timeout_due(child.job.since, now, hard):
                    self.kill(child, f"hard timeout after {hard:g}s")

    # -- keeping the pool -----------------------------------------------------------------

    def manage(self, target: int, process_id: int) -> None:
        """Stop the extras, replace the children that should go, start the missing."""
        for extra in decisions.extras(self.wanted(), target):
            self.stop(extra, "scale down")
        spare_count = decisions.spares(target)
        replaced = decisions.next_replacement(list(self.children.values()), self.generation,
                                              spare_count)
        if replaced is not None:
            self.stop(replaced, replaced.retire_reason or "reload")
        self._recycle(process_id, spare_count)
        missing = target - len(self.wanted())
        if missing > 0 and self._may_spawn():
            # After a failed start, probe with one child until one comes up.
            self.spawn_many(process_id, [None] * (1 if self.restart_failures else missing))

    def _recycle(self, process_id: int, spare_count: int) -> None:
        """Hand over from the children to be recycled: stop those whose successor is
        ready, fork successors as the spares allow, stop the others that asked."""
        for child in self.children.values():
            if child.successor is not None and child.successor not in self.children \
                    and child.stop_cause is None:
                child.successor = None   # it failed to start: another is forked later
            if child.ready and child.checked_schema_of:
                self.schema_known_for = child.checked_schema_of
        for child in decisions.predecessors_to_stop(list(self.children.values()), self._ready):
            self.stop(child, child.retire_reason or "max-items")
        successors = decisions.successors_due(list(self.children.values()), spare_count) \
            if self._may_spawn() else []
        # After a failed start, probe with one child until one comes up.
        successors = successors[:1] if self.restart_failures else successors
        for child, pid in zip(successors, self.spawn_many(process_id, successors)):
            child.successor = pid
        for child in decisions.stops_due(list(self.children.values()), successors):
            self.stop(child, child.retire_reason or "max-items")

    def _ready(self, pid: int) -> Optional[bool]:
        child = self.children.get(pid)
        return None if child is None else child.ready

    def _may_spawn(self) -> bool:
        return time.monotonic() >= self.next_spawn_at and not self.probing()

    def restart_on_request(self, database_now: datetime,
                           requested_at: Optional[datetime]) -> None:
        """`prefork-queue restart`: each request is acted on once, when it is due."""
        if requested_at is None or not decisions.restart_request_applies(
                requested_at, database_now, self.restart_applied):
            return
        self.restart_applied = requested_at
        self.restart_started_before(requested_at, database_now)

    def restart_started_before(self, requested_at: datetime, database_now: datetime) -> None:
        """Retire, one at a time, the children started before the request (as the
        database's clock tells), not those started after it."""
        retired = decisions.to_restart(list(self.children.values()), requested_at,
                                       database_now, utc_now())
        for child in retired:
            child.retire_reason = "restart"
        if retired:
            event("restart_requested", requested_at=str(requested_at), workers=len(retired))

    def wake_waiting(self, jobs: int) -> None:
        for child in self.waiting()[:jobs]:
            child.wake()
