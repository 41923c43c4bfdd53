"""The supervisor (the parent process): fork children, watch them, keep the pool
at its size, hand back the jobs of children that die, drain on SIGTERM,
reload on SIGHUP.

Signal handlers only record the signal and wake the main loop; everything
else (logging, database work, forking) happens in the loop, at safe points.
The parent never runs a handler. Its own database connection serves lease
extension, hand-backs and lease recovery; children never use it.

This module is the loop and the dispatch of signals; the rest is in rooms of
its own: pool.py (fork, reap, stop, keep the count), children.py (what each
child said over protocol.py's pipe), leases.py (extension, hand-backs,
write-behind), handing.py (our claims for the children, claimer = supervisor),
upkeep.py (the parent's database work), decisions.py (the rules, pure),
reconfigure.py (the config read anew), view.py (what the observers see).
"""
import enum
import gc
import logging
import os
import select
import signal
import time
from typing import Any, Callable, Optional

from .. import logs, observers
from ..jobs import Job, Outcome
from ..logs import event
from ..titles import master_title, set_title
from ..process_signals import SUPERVISOR_SIGNALS
from ..wakeups.listening import Listeners
from ..wakeups.waker import Waker
from . import decisions, leases, startup
from .children import ChildProcess, Deadline, FinishedJob, describe_status
from .handing import Handing, next_write_at
from .reconfigure import load_new_config, warn_overridden
from .pool import Pool
from .protocol import Ready
from .upkeep import Upkeep
from .view import ObservedSupervisor

QUICK_STOP_GRACE = 3.0         # seconds children get after SIGQUIT before SIGKILL
TICK = 1.0                     # longest sleep of the main loop


def _survive(step: str, call: Callable[[], object]) -> None:
    """The main loop's last guard: a signal's handler or an observer that raises what
    nobody expected is logged (its class, and the traceback for the operator) and the
    loop goes on; one faulty step must not end the supervisor and the jobs it runs."""
    try:
        call()
    except Exception as exc:
        logs.unexpected("supervisor_step_failed", exc, step=step)


def _each_observer(each: list[observers.Observer], step: str,
                   call: Callable[[observers.Observer], object]) -> None:
    """call(observer) for each observer, each call guarded by _survive."""
    for observer in each:
        _survive(f"{type(observer).__name__}.{step}", lambda: call(observer))


def _log_exit(child: ChildProcess, status_text: str) -> str:
    """Log a child's exit, at WARNING unless we asked for it; the reason it gives."""
    expected = child.kill_reason or (child.stopping and status_text == "exit code 0")
    boot_failure = not child.ready and not child.stopping
    reason = child.kill_reason or child.stop_cause or ("boot failure" if boot_failure
                                                       else "crash")
    event("worker_exited", level=logging.INFO if expected else logging.WARNING,
          pid=child.pid, slot=child.slot, status=status_text, reason=reason)
    if child.retire_reason and child.stop_cause == child.retire_reason:
        event("worker_recycled", pid=child.pid, reason=child.retire_reason)
    return reason


class Phase(enum.Enum):
    """The supervisor's life: running, then a graceful drain or a quick stop."""
    RUNNING = "running"
    DRAINING = "draining"     # SIGTERM or SIGINT: children finish their jobs
    QUITTING = "quitting"     # SIGQUIT or a second SIGINT: jobs released unused


class Supervisor:
    def __init__(self, config: Any, flags: Any) -> None:
        self.config = config
        self.flags = flags            # command-line flags win again at each reload
        self.target: int = config.workers
        self.pool = Pool(config, forget_parent=self._forget_parent_resources,
                         claim_for_children=self._claim_for_children,
                         hands_jobs=self._hands_jobs)
        self.handing = Handing()   # our claims for the children (claimer = supervisor)
        self.waker = Waker()
        self.pending_signals: list[int] = []
        self.state = Phase.RUNNING
        self.upkeep: Any = None       # an Upkeep once run() has connected
        self.done = self.dead = 0
        self.next_extend_at = self.next_poll_at = 0.0
        self.listeners = Listeners()   # the doorbell and the wake-up port
        self.observers: list[observers.Observer] = []
        self.view = ObservedSupervisor(self)   # what the observers see of us
        self.title: Optional[str] = None

    @property
    def children(self) -> dict[int, ChildProcess]:
        return self.pool.children

    # -- start and main loop -------------------------------------------------

    def run(self) -> int:
        """Run until drained; returns the process exit status."""
        warn_overridden(self.config)
        self.observers = observers.build(self.config)   # a bad metrics address stops us here
        wakeup_address = self.listeners.open_port(self.config.wakeup_bind)   # or a bad bind
        # Errors here stop the start, before any fork.
        self.upkeep = Upkeep(self.config, self.pool.pulse)
        self.upkeep.wakeup_address = wakeup_address
        startup.defer_stops()   # a stop from here on must not cut the registry insert short
        self.upkeep.register(self.target)
        self._install_signal_handlers()
        self.listeners.open_bell(self.upkeep.store.bell_key, self.config.doorbell)
        event("supervisor_started", workers=self.target, queues=",".join(self.config.queues),
              pid=os.getpid(), connection=self.upkeep.connection_id())
        self._notify("started")
        # Objects imported so far are never collected in the children, so
        # their pages stay shared copy-on-write instead of being dirtied by gc.
        gc.freeze()
        while self.state is Phase.RUNNING or self.children:
            self._dispatch_signals()
            self._reap()
            self._manage()
            self._periodic()
            self._hand_out()
            self._update_title()
            _each_observer(self.observers, "tick", lambda o: o.tick(time.monotonic(), self.view))
            if self.state is not Phase.RUNNING and not self.children:
                break
            self._wait()
        self.upkeep.flush_hand_backs()
        self.upkeep.flush_rollup()
        self.upkeep.leave()
        self.upkeep.close()
        self.listeners.close()
        event("supervisor_stopped", done=self.done, dead=self.dead_since_start())
        self._notify("stopped")
        return 0

    def _install_signal_handlers(self) -> None:
        def record(signum: int, frame: object) -> None:
            self.pending_signals.append(signum)
            self.waker.wake()

        for signum in SUPERVISOR_SIGNALS:
            signal.signal(signum, record)
        # Taken once startup's handler no longer runs, and applied first, as they came first.
        self.pending_signals[:0] = startup.take_pending()

    def _dispatch_signals(self) -> None:
        while self.pending_signals:
            name = "handle_" + signal.Signals(self.pending_signals.pop(0)).name.lower()
            _survive(name, getattr(self, name))

    def _wait(self) -> None:
        fds = [self.waker.read_fd] + [c.read_fd for c in self.children.values()]
        fds += self.listeners.fds()
        outboxes = {c.wake_fd: c for c in self.children.values() if c.outbox}
        try:
            ready, writable, _ = select.select(fds, list(outboxes), [], self._sleep_time())
        except InterruptedError:
            return
        for fd in writable:
            outboxes[fd].flush()
        for child in list(self.children.values()):
            if child.read_fd in ready:
                self._handle_messages(child)
        if self.waker.read_fd in ready:
            self.waker.sleep(0)   # drain the wake-up bytes
        wake, self.next_poll_at = self.listeners.heard(
            ready, self.config.queues, time.monotonic(), self.next_poll_at,
            bool(self.pool.waiting()) or self.handing.hungry(self.children.values()))
        self.pool.wake_waiting(wake)
        if wake:
            self.handing.look_again()
            if not self.pending_signals:   # a stop or a reload goes first
                self._hand_out()   # at once: the pass's upkeep would delay the pickup

    def _sleep_time(self) -> float:
        now = time.monotonic()
        deadlines = [now + TICK, self.next_extend_at]
        deadlines += [observer.next_deadline() for observer in self.observers]
        deadlines += [c.deadline.at for c in self.children.values() if c.deadline]
        deadlines += [c.unsaved_since + decisions.WRITE_BEHIND_AFTER
                      for c in self.children.values() if c.unsaved]
        write_at = next_write_at(self.children.values())   # claimer = supervisor
        deadlines += [] if write_at is None else [write_at]
        size = self.upkeep.heartbeat.pool_size(self.target, self.children.values())
        if self.state is Phase.RUNNING and len(self.pool.wanted()) < size \
                and not self.pool.probing():
            deadlines.append(self.pool.next_spawn_at)
        if self.pool.waiting() or self.handing.hungry(self.children.values()):
            deadlines.append(self.next_poll_at)
        return max(0.0, min(deadlines) - now)

    # -- signals (one method each) --------------------------------------------

    def handle_sigterm(self) -> None:
        self._begin_drain("SIGTERM")

    def handle_sigint(self) -> None:
        if self.state is Phase.RUNNING:
            self._begin_drain("SIGINT")
        else:
            self._quick_stop("second SIGINT")

    def handle_sigquit(self) -> None:
        self._quick_stop("SIGQUIT")

    def handle_sighup(self) -> None:
        self._reload()

    def handle_sigttin(self) -> None:
        self.target += 1
        event("workers_changed", workers=self.target, signal="SIGTTIN")

    def handle_sigttou(self) -> None:
        if self.target > 1:
            self.target -= 1
        event("workers_changed", workers=self.target, signal="SIGTTOU")

    def handle_sigusr1(self) -> None:
        try:
            logs.configure_from(self.config)
        except OSError as exc:   # its folder moved away, a full disk: keep writing the old one
            event("log_reopen_failed", path=self.config.log_file, error=logs.os_error_text(exc))
            return
        event("logs_reopened")

    def handle_sigchld(self) -> None:
        pass  # the loop reaps on every pass; the signal only woke it

    # -- children: what they say, how they end --------------------------------

    def _forget_parent_resources(self) -> None:
        """In a new child: drop what belongs to the parent, without closing it politely."""
        self.waker.close()
        self.listeners.forget()
        self.upkeep.abandon()

    def _hands_jobs(self) -> bool:
        return decisions.supervisor_claims(self.config, bool(self.upkeep.limits.rules))

    def _claim_for_children(self, count: int) -> list[Job]:
        finished, claimed = leases.complete_and_claim(self.upkeep, self.children.values(), count)
        self._jobs_finished(finished)
        return claimed

    def _hand_out(self) -> None:   # claimer = supervisor
        self._jobs_finished(self.handing.hand_out(self.upkeep, self.children.values(),
                                                  self.config, self.state is Phase.RUNNING))

    def _handle_messages(self, child: ChildProcess) -> None:
        for message in child.read_messages():
            if isinstance(message, Ready):
                self.pool.restart_failures = 0
                event("worker_ready", pid=child.pid, slot=child.slot,
                      connection=message.connection)
            self._jobs_finished(child.apply(message))

    def _jobs_finished(self, finished_jobs: list[FinishedJob]) -> None:
        for finished in finished_jobs:
            self.handing.timed(finished)
            self.upkeep.rollup.count(finished, self.upkeep.process_id)
            self.done += finished.outcome is Outcome.DONE
            self.dead += finished.outcome is Outcome.DEAD
            self._notify("job_finished", job_id=finished.job.lease.job_id, type=finished.job.type,
                         queue=finished.job.queue, outcome=finished.outcome,
                         seconds=finished.seconds)

    def _reap(self) -> None:
        for child, status in self.pool.reap():
            self._handle_messages(child)   # what it said just before it died
            child.close()
            self._child_exited(child, status)

    def _child_exited(self, child: ChildProcess, status: int) -> None:
        status_text = describe_status(status)
        if child.job is not None and self.pool.pulse.silent(self.config):
            child.charge_job = False   # we were silent: it gave its job up (parent_pulse.py)
        if child.job is not None and child.charge_job:   # a failed attempt, for the rollup
            self.upkeep.rollup.crash(child.job, self.upkeep.process_id)
        self._jobs_finished(self.pool.cancels.child_exited(self.upkeep, child))
        self._jobs_finished(leases.hand_back_all(self.upkeep, child,
                                                 child.kill_reason or status_text))
        self._notify("worker_exited", reason=_log_exit(child, status_text), status=status_text)
        if not child.ready and not child.stopping:   # a boot failure
            self.pool.back_off_restarts(status_text)

    def _manage(self) -> None:
        if self.state is Phase.RUNNING:   # none started while the heartbeat fails
            self.upkeep.heartbeat.keep(self.pool, self.target, self.upkeep.process_id)

    # -- periodic work -------------------------------------------------------------

    def _periodic(self) -> None:
        now = time.monotonic()
        self.pool.cancels.tick(self.upkeep, self.children, self.config, now)
        self.pool.enforce_deadlines(now)
        if now >= self.next_extend_at:
            self.next_extend_at = now + self.config.lease_seconds / 3
            leases.extend(self.upkeep, self.children.values(), now, self.config.lease_seconds)
        waiting = self.pool.waiting()
        if (waiting or self.handing.hungry(self.children.values())) and now >= self.next_poll_at:
            self.next_poll_at = now + self.config.poll_interval
            self.handing.look_again()
            self.pool.wake_waiting(self.upkeep.ready_count(len(waiting)) if waiting else 0)
        self.upkeep.limits_when_due(now, list(self.children.values()))
        self._jobs_finished(leases.write_behind_slow_jobs(self.upkeep, self.children.values(),
                                                          now))
        # A dead child's job first: its hand-back says why (a hard timeout, a crash)
        # and charges it; once its lease has run out, recovery would take it first.
        self.upkeep.flush_hand_backs()
        self.upkeep.recover_when_due(now)
        leases.after_reconnection(self.upkeep, self.children.values(), self.pool.database_back, now)
        self.upkeep.write_rollup_when_due(now)
        if self.upkeep.beat_when_due(now, self.target, lambda: self.pool.describe(now)):
            self.pool.generation += 1   # rejoined under a new id: roll the children onto it
        control = self.upkeep.control_when_due(now)
        if control:
            self.pool.restart_on_request(*control[:2])

    # -- stopping and reloading -------------------------------------------------------

    def _begin_drain(self, why: str) -> None:
        if self.state is not Phase.RUNNING:
            return
        self.state = Phase.DRAINING
        event("supervisor_stopping", signal=why, mode="graceful",
              graceful_timeout_s=self.config.graceful_timeout)
        self._notify("stopping", mode="graceful")
        for child in self.children.values():
            self.pool.stop(child, "shutdown")

    def _quick_stop(self, why: str) -> None:
        if self.state is Phase.QUITTING:
            return
        self.state = Phase.QUITTING
        event("supervisor_stopping", signal=why, mode="quick")
        self._notify("stopping", mode="quick")
        deadline = time.monotonic() + QUICK_STOP_GRACE
        for child in self.children.values():
            self.pool.kill(child, "quick stop", signal.SIGQUIT, charge=False)
            child.deadline = Deadline(deadline, "quick stop", False)

    def _reload(self) -> None:
        """SIGHUP: apply the config file anew; whatever refuses it leaves the old one in force."""
        new_config = load_new_config(self.flags, self.config.path)
        if new_config is None:
            return
        self.upkeep.reconfigure(new_config)
        self.config, self.target = new_config, new_config.workers
        self.pool.config = new_config
        self.pool.generation += 1
        event("config_reloaded", workers=self.target, queues=",".join(new_config.queues),
              generation=self.pool.generation)
        warn_overridden(new_config)
        self._notify("reloaded", config=new_config)

    def _notify(self, name: str, **fields: Any) -> None:
        _each_observer(self.observers, "notify", lambda o: o.notify(name, fields))

    def dead_since_start(self) -> int:
        """Jobs that went dead under us: by a failure a worker recorded, or by a worker's
        death (a poison job, or one out of attempts)."""
        return self.dead + self.upkeep.handed_back_dead   # run() has set up upkeep

    def _update_title(self) -> None:
        note = {Phase.DRAINING: "draining", Phase.QUITTING: "stopping"}.get(self.state) \
            or self.pool.backoff_note(time.monotonic())
        title = master_title(self.config.queues, len(self.pool.wanted()), self.target,
                             self.done, self.dead_since_start(), note)
        if title != self.title:
            self.title = title
            set_title(title)

