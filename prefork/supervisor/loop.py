"""The supervisor (the parent process): fork children, watch them, keep the pool
at its size, hand back the jobs of children that die, drain on SIGTERM,
reload on SIGHUP.

Signal handlers only record the signal and wake the main loop; everything
else (logging, database work, forking) happens in the loop, at safe points.
The parent never runs a handler. Its own database connection serves lease
extension, hand-backs and lease recovery; children never use it.
"""
import gc
import json
import logging
import os
import random
import select
import signal
import time
from datetime import datetime, timezone

from .. import config as config_module, logs, observers, registry
from ..errors import UserError
from ..logs import event
from ..observers import schedules
from ..observers.titles import master_title, set_title
from ..process_signals import BLOCKED_ACROSS_FORK, SUPERVISOR_SIGNALS
from ..wakeups import doorbell
from ..wakeups.waker import Waker
from . import child as child_module, startup
from .children import ChildProcess, describe_status
from .upkeep import Upkeep

QUICK_STOP_GRACE = 3.0         # seconds children get after SIGQUIT before SIGKILL
FIRST_RESTART_BACKOFF = 0.5
TICK = 1.0                     # longest sleep of the main loop
WRITE_BEHIND_AFTER = 1.0       # seconds a child's done job may wait for its batch's write
ROLLING_CAUSES = ("reload", "restart", "max-items", "max-memory")   # replaced one at a time


class Supervisor:
    def __init__(self, config, flags):
        self.config = config
        self.flags = flags            # command-line flags win again at each reload
        self.target = config.workers
        self.generation = 0
        self.children = {}
        self.waker = Waker()
        self.pending_signals = []
        self.state = "running"        # running -> draining | quitting
        self.upkeep = None
        self.restart_failures = 0
        self.next_spawn_at = 0.0
        self.done = self.dead = 0
        self.next_extend_at = self.next_poll_at = 0.0
        self.bell = None
        self.restart_applied = None   # the newest restart request already acted on
        self.observers = []
        self.title = None

    # -- start and main loop -------------------------------------------------

    def run(self) -> int:
        """Run until drained; returns the process exit status."""
        self.observers = observers.build(self.config)   # a bad metrics address stops us here
        self.upkeep = Upkeep(self.config)   # errors here stop the start, before any fork
        startup.defer_stops()   # a stop from here on must not cut the registry insert short
        self.upkeep.register(self.target)
        self._install_signal_handlers()
        self.bell = doorbell.Doorbell(self.upkeep.store.bell_key)
        event("supervisor_started", workers=self.target, queues=",".join(self.config.queues),
              pid=os.getpid(), connection=self.upkeep.connection_id())
        self._notify("started")
        # Objects imported so far are never collected in the children, so
        # their pages stay shared copy-on-write instead of being dirtied by gc.
        gc.freeze()
        while self.state == "running" or self.children:
            self._dispatch_signals()
            self._reap()
            self._manage()
            self._periodic()
            self._update_title()
            for observer in self.observers:
                observer.tick(time.monotonic(), self)
            if self.state != "running" and not self.children:
                break
            self._wait()
        self.upkeep.flush_hand_backs()
        self.upkeep.leave()
        self.upkeep.close()
        self.bell.close()
        event("supervisor_stopped", done=self.done, dead=self.dead)
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

    def _dispatch_signals(self):
        while self.pending_signals:
            signum = self.pending_signals.pop(0)
            getattr(self, "handle_" + signal.Signals(signum).name.lower())()

    def _wait(self):
        fds = [self.waker.read_fd, self.bell.fileno()] + [c.read_fd for c in self.children.values()]
        try:
            ready, _, _ = select.select(fds, [], [], self._sleep_time())
        except InterruptedError:
            return
        for child in list(self.children.values()):
            if child.read_fd in ready:
                self._handle_messages(child)
        if self.waker.read_fd in ready:
            self.waker.sleep(0)   # drain the wake-up bytes
        if self.bell.fileno() in ready:
            rung = self.bell.rings()
            self._wake_waiting(sum(rung.get(queue, 0) for queue in self.config.queues))

    def _sleep_time(self):
        now = time.monotonic()
        deadlines = [now + TICK, self.next_extend_at]
        deadlines += [observer.next_deadline() for observer in self.observers]
        deadlines += [c.deadline[0] for c in self.children.values() if c.deadline]
        deadlines += [self._unsaved_since(c) + WRITE_BEHIND_AFTER
                      for c in self.children.values() if c.unsaved]
        if self.state == "running" and len(self._wanted()) < self.target and not self._probing():
            deadlines.append(self.next_spawn_at)
        if self._waiting_children():
            deadlines.append(self.next_poll_at)
        return max(0.0, min(deadlines) - now)

    # -- signals (one method each) --------------------------------------------

    def handle_sigterm(self):
        self._begin_drain("SIGTERM")

    def handle_sigint(self):
        if self.state == "running":
            self._begin_drain("SIGINT")
        else:
            self._quick_stop("second SIGINT")

    def handle_sigquit(self):
        self._quick_stop("SIGQUIT")

    def handle_sighup(self):
        self._reload()

    def handle_sigttin(self):
        self.target += 1
        event("workers_changed", workers=self.target, signal="SIGTTIN")

    def handle_sigttou(self):
        if self.target > 1:
            self.target -= 1
        event("workers_changed", workers=self.target, signal="SIGTTOU")

    def handle_sigusr1(self):
        logs.configure_from(self.config)
        event("logs_reopened")

    def handle_sigchld(self):
        pass  # the loop reaps on every pass; the signal only woke it

    # -- children: spawn, read, reap, stop ------------------------------------

    def _spawn(self):
        slot = self._free_slot()
        read_fd, write_fd = os.pipe()           # child -> parent: what it does
        wake_read_fd, wake_fd = os.pipe()       # parent -> child: work is ready
        max_items = self.config.max_items
        if max_items:
            max_items += random.randint(0, self.config.max_items_jitter)
        spec = child_module.ChildSpec(slot, self.config, write_fd, wake_read_fd, os.getpid(),
                                      self.upkeep.process_id, max_items)
        # Hold signals across fork: one arriving before the child has reset its
        # handlers would run our handler in the child's copy of us and be lost.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED_ACROSS_FORK)
        pid = os.fork()
        if pid == 0:
            self._forget_parent_resources()
            child_module.run_child(spec)   # never returns; unblocks once its handlers are set
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        os.close(wake_read_fd)
        os.set_blocking(read_fd, False)
        os.set_blocking(wake_fd, False)
        self.children[pid] = ChildProcess(pid, slot, self.generation, read_fd, wake_fd)
        event("worker_spawned", pid=pid, slot=slot, generation=self.generation)

    def _forget_parent_resources(self):
        """In the new child: drop what belongs to the parent, without closing it politely."""
        for other in self.children.values():
            other.close()
        self.waker.close()
        self.bell.sock.close()   # the file stays: it is the parent's
        self.upkeep.abandon()

    def _free_slot(self):
        used = {c.slot for c in self.children.values() if not c.stopping}
        return next(slot for slot in range(1, len(used) + 2) if slot not in used)

    def _handle_messages(self, child):
        for message in child.read_messages():
            if message["e"] == "ready":
                self.restart_failures = 0
                event("worker_ready", pid=child.pid, slot=child.slot,
                      connection=message["connection"])
            for finished in child.apply(message):
                self._job_finished(finished)

    def _job_finished(self, finished):
        self.done += finished["outcome"] == "done"
        self.dead += finished["outcome"] == "dead"
        self._notify("job_finished", **finished)

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is not None:
                self._handle_messages(child)   # what it said just before it died
                child.close()
                self._child_exited(child, status)

    def _child_exited(self, child, status):
        status_text = describe_status(status)
        if status_text == f"exit code {child_module.FATAL_EXIT}":
            child.charge_job = False   # the database failed the worker, not the job
        if child.job is not None:
            self.upkeep.hand_back(child.job, child.kill_reason or status_text, child.charge_job)
            child.job = None
        for job_id, token in child.held.items():   # never started: not the jobs' fault
            self.upkeep.hand_back({"id": job_id, "token": token},
                                  f"{child.kill_reason or status_text} before it started", False)
        child.held = {}
        if child.unsaved and not self._write_unsaved(child, "its worker died"):
            for job in child.unsaved.values():   # ran, but unrecorded: they run again
                self.upkeep.hand_back(job, f"{child.kill_reason or status_text} before its "
                                      "completion was written", False)
            child.unsaved = {}
        expected = child.kill_reason or (child.stopping and status_text == "exit code 0")
        boot_failure = not child.ready and not child.stopping
        reason = child.kill_reason or child.stop_cause or ("boot failure" if boot_failure
                                                           else "crash")
        event("worker_exited", level=logging.INFO if expected else logging.WARNING,
              pid=child.pid, slot=child.slot, status=status_text, reason=reason)
        self._notify("worker_exited", reason=reason, status=status_text)
        if child.retire_reason and child.stop_cause == child.retire_reason:
            event("worker_recycled", pid=child.pid, reason=child.retire_reason)
        if boot_failure:
            self._back_off_restarts(status_text)

    def _back_off_restarts(self, cause):
        self.restart_failures += 1
        delay = min(self.config.restart_backoff_cap,
                    FIRST_RESTART_BACKOFF * 2 ** (self.restart_failures - 1))
        self.next_spawn_at = time.monotonic() + delay
        event("restart_backoff", level=logging.WARNING, failures=self.restart_failures,
              wait_s=round(delay, 2), reason=f"children fail at start ({cause})")

    def _stop(self, child, cause):
        """Ask a child to finish its job and exit (SIGTERM); after graceful_timeout it is
        killed and its job handed back without using an attempt."""
        if child.stop_cause is None:
            child.stop_cause = cause
            child.deadline = (time.monotonic() + self.config.graceful_timeout,
                              "graceful timeout", False)
        child.send(signal.SIGTERM)

    def _kill(self, child, reason, signum=signal.SIGKILL, charge=True):
        """Stop a child now. charge: does this count against the job it holds?"""
        child.stop_cause = child.stop_cause or reason
        child.kill_reason, child.charge_job = reason, charge
        child.send(signum)

    # -- keeping the pool ------------------------------------------------------

    def _wanted(self):
        return [c for c in self.children.values() if not c.stopping]

    def _manage(self):
        if self.state != "running":
            return
        wanted = self._wanted()
        for extra in sorted(wanted, key=self._retire_order)[:max(0, len(wanted) - self.target)]:
            self._stop(extra, "scale down")
        self._replace_one()
        missing = self.target - len(self._wanted())
        if missing > 0 and time.monotonic() >= self.next_spawn_at and not self._probing():
            # After a failed start, probe with one child until one comes up.
            for _ in range(1 if self.restart_failures else missing):
                self._spawn()

    def _probing(self):
        """A trial child is starting after failed starts: wait for its verdict."""
        return self.restart_failures and any(not c.ready for c in self._wanted())

    def _replace_one(self):
        """Rolling replacement for reload and recycling: one child at a time, so the
        pool never surges past workers + 1 processes nor recycles all at once."""
        if any(c.stop_cause in ROLLING_CAUSES for c in self.children.values()):
            return
        candidates = [c for c in self._wanted()
                      if c.retire_reason or c.generation != self.generation]
        if candidates:
            child = min(candidates, key=self._retire_order)
            self._stop(child, child.retire_reason or "reload")

    @staticmethod
    def _retire_order(child):
        """Idle before busy, then oldest first."""
        return (child.job is not None, child.started)

    # -- periodic work -------------------------------------------------------------

    def _periodic(self):
        now = time.monotonic()
        for child in list(self.children.values()):
            if child.deadline and now >= child.deadline[0]:
                _, reason, charge = child.deadline
                child.deadline = None
                self._kill(child, reason, charge=charge)
            elif child.job and not child.kill_reason:
                self._enforce_hard_timeout(child, now)
        if now >= self.next_extend_at:
            self.next_extend_at = now + self.config.lease_seconds / 3
            self._extend_leases(now)
        if self._waiting_children() and now >= self.next_poll_at:
            self.next_poll_at = now + self.config.poll_interval
            self._wake_waiting(self.upkeep.ready_count(len(self._waiting_children())))
        self._write_behind_slow_jobs(now)
        self.upkeep.recover_when_due(now)
        self.upkeep.flush_hand_backs()
        if self.upkeep.beat_when_due(now, self.target, self._children_json(now)):
            self.generation += 1   # rejoined under a new id: roll the children onto it
        control = self.upkeep.control_when_due(now)
        if control:
            self._apply_restart(*control[:2])

    def _children_json(self, now):
        """What each child does, for the registry (and `prefork-queue status`)."""
        return json.dumps([
            {"pid": c.pid, "slot": c.slot,
             "state": "stopping" if c.stopping else "busy" if c.job else "idle",
             "job_id": c.job and c.job["id"], "type": c.job and c.job["type"],
             "seconds": c.job and round(now - c.job["since"], 1)}
            for c in sorted(self.children.values(), key=lambda c: c.slot)])

    def _apply_restart(self, database_now, requested_at):
        """`prefork-queue restart`: retire, one at a time, the children started before
        the request (as the database's clock tells), not those started after it."""
        if requested_at is None or requested_at > database_now \
                or requested_at == self.restart_applied:
            return
        self.restart_applied = requested_at
        offset = database_now - datetime.now(timezone.utc).replace(tzinfo=None)
        retired = 0
        for child in self._wanted():
            started = datetime.fromtimestamp(child.started_wall, timezone.utc).replace(tzinfo=None)
            if started + offset < requested_at and not child.retire_reason:
                child.retire_reason = "restart"
                retired += 1
        if retired:
            event("restart_requested", requested_at=str(requested_at), workers=retired)

    def _enforce_hard_timeout(self, child, now):
        _, hard = registry.timeouts(child.job["type"], self.config)
        if hard and now - child.job["since"] > hard:
            self._kill(child, f"hard timeout after {hard:g}s")

    def _waiting_children(self):
        return [c for c in self.children.values() if c.waiting and not c.stopping]

    def _write_unsaved(self, child, why):
        """Write the completions the child has not written yet: those jobs ran to
        success. False when the database is away."""
        completed = self.upkeep.complete(list(child.unsaved.items()), why)
        if completed is None:
            return False
        for job_id, job in child.unsaved.items():
            self._job_finished(dict(job, outcome="done" if job_id in completed else "lost"))
        child.unsaved = {}
        return True

    def _write_behind_slow_jobs(self, now):
        """A child writes a batch's completions with the batch's last job. When a
        slow job holds that up, we write them, so done jobs read done soon."""
        for child in self.children.values():
            if child.unsaved and self._unsaved_since(child) <= now - WRITE_BEHIND_AFTER:
                self._write_unsaved(child, "its worker is busy with a slower job")

    @staticmethod
    def _unsaved_since(child):
        return min(job["ended"] for job in child.unsaved.values())

    def _wake_waiting(self, jobs):
        for child in self._waiting_children()[:jobs]:
            child.wake()

    def _extend_leases(self, now):
        # Only jobs older than a third of the lease need it; a fast job has
        # finished (and its token is void) by the time we would ask.
        due = now - self.config.lease_seconds / 3
        leases = [(c.job["id"], c.job["token"]) for c in self.children.values()
                  if c.job and c.job["since"] <= due]
        leases += [held for c in self.children.values() for held in c.held.items()]
        leases += [(job_id, job["token"]) for c in self.children.values()
                   for job_id, job in c.unsaved.items()]
        if leases:
            self.upkeep.extend(leases)

    # -- stopping and reloading -------------------------------------------------------

    def _begin_drain(self, why):
        if self.state != "running":
            return
        self.state = "draining"
        event("supervisor_stopping", signal=why, mode="graceful",
              graceful_timeout_s=self.config.graceful_timeout)
        self._notify("stopping", mode="graceful")
        for child in self.children.values():
            self._stop(child, "shutdown")

    def _quick_stop(self, why):
        if self.state == "quitting":
            return
        self.state = "quitting"
        event("supervisor_stopping", signal=why, mode="quick")
        self._notify("stopping", mode="quick")
        deadline = time.monotonic() + QUICK_STOP_GRACE
        for child in self.children.values():
            self._kill(child, "quick stop", signal.SIGQUIT, charge=False)
            child.deadline = (deadline, "quick stop", False)

    def _reload(self):
        try:
            new_config = config_module.load(self.flags, path=self.config.path)
            registry.import_apps(new_config.app)
            schedules.validate(new_config)   # commands and schedules, before applying
        except UserError as exc:
            event("config_reload_failed", level=logging.ERROR, error=str(exc))
            return
        self.upkeep.reconfigure(new_config)
        self.config, self.target = new_config, new_config.workers
        self.generation += 1
        logs.configure_from(new_config)
        event("config_reloaded", workers=self.target, queues=",".join(new_config.queues),
              generation=self.generation)
        self._notify("reloaded", config=new_config)

    def _notify(self, name, **fields):
        for observer in self.observers:
            observer.notify(name, fields)

    def _update_title(self):
        note = {"draining": "draining", "quitting": "stopping"}.get(self.state, "")
        if not note and self.restart_failures:
            note = f"restart backoff {max(0, self.next_spawn_at - time.monotonic()):.0f}s"
        title = master_title(self.config.queues, len(self._wanted()), self.target,
                             self.done, self.dead, note)
        if title != self.title:
            self.title = title
            set_title(title)

