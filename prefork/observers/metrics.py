"""Prometheus metrics, served by the supervisor (the parent) at `metrics_address`.

A supervisor observer (see observers/__init__.py). Everything is counted on the main
loop, from the supervisor's notifications and ticks; the HTTP server thread
only reads. Children never serve: the listening socket is closed in every
forked child. Queue depth is read from the database through the parent's
connection (the view's queue_stats) on the main loop, at most every
SAMPLE_INTERVAL seconds (the parent's connection is not thread-safe, and a
scrape must not cost a query).

Metrics (a dedicated registry, nothing from the global one):
    prefork_jobs_total{queue,type,outcome}     jobs finished by this supervisor's children;
        outcome: done, retry (failed, will run again), dead, lost (lease lost),
        released (given back unfinished on a quick stop), cancelled (stopped by a
        cancellation while it ran)
    prefork_jobs_in_progress{queue,type}       jobs the children are running now
        (claimed = sum of prefork_jobs_total + prefork_jobs_in_progress, plus the
        jobs of children that died, which the worker-exit reasons count)
    prefork_job_duration_seconds{queue,type}   histogram, claim to finish, every outcome
    prefork_workers_alive, prefork_workers_target
    prefork_worker_exits_total{reason}         crash, boot-failure, timeout, max-items,
        max-memory, reload (each followed by a replacement), scale-down, shutdown,
        quick-stop, graceful-timeout
    prefork_queue_jobs{queue,state}            ready (due now), delayed, reserved, dead,
        cancelled, waiting (a workflow's job not released yet)
    prefork_workflows{state}                   outermost workflows running, dead (stopped by
        a dead member) or cancelled; done ones are not counted. Read with the queue figures.
    prefork_queue_oldest_ready_age_seconds{queue}   0 when nothing is due
    prefork_queue_sampled_timestamp_seconds    when the queue figures were read
    prefork_limit_running{type,key}            jobs of a limited group running now
    prefork_limit_waiting{type,key}            due jobs of the group waiting to start
    prefork_limit_concurrency{type,key}        the group's concurrency limit (groups with
        a rate limit alone have none)
    prefork_limit_groups                       limited groups with jobs running or waiting,
        all of them: the three above show the MAX_LIMIT_GROUPS busiest (a key is data,
        and a label per key would grow without bound); key "" is the type's jobs
        enqueued without a concurrency key. Read with the queue figures.
"""
import collections
import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any, Mapping, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .. import registry as handlers
from ..addresses import is_loopback, parse_host_port
from ..errors import UserError
from ..jobs import JobStatus
from ..limits.rules import LimitUsage
from ..logs import event

if TYPE_CHECKING:
    from . import SupervisorView

SAMPLE_INTERVAL = 15.0   # seconds between reads of the queue figures
SAMPLE_RETRY = 1.0       # seconds before a read the database did not answer is tried again
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
                    float("inf"))
# The job states a queue's figures count; delayed: ready, but not due yet.
QUEUE_STATES = (JobStatus.READY.value, "delayed", JobStatus.RESERVED.value, JobStatus.DEAD.value,
                JobStatus.CANCELLED.value, JobStatus.WAITING.value)
# The workflow states counted (done ones are not: there are ever more of them).
WORKFLOW_STATES = ("running", "dead", "cancelled")
# The limited groups exported, the busiest (running + waiting) first: a bound on the
# series however many concurrency keys the jobs carry.
MAX_LIMIT_GROUPS = 100
UNKNOWN_TYPE = "(unknown)"   # a job type with no handler: its name is data, not a label


def parse_address(text: str) -> tuple[str, int]:
    """(host, port) from HOST:PORT or [IPv6]:PORT; UserError naming the problem otherwise."""
    return parse_host_port(text, "metrics_address", "127.0.0.1:9187")


def reason_label(reason: str) -> str:
    """A worker-exit reason as a label value: "hard timeout after 3s" -> "timeout",
    "boot failure" -> "boot-failure"."""
    if reason.startswith("hard timeout"):
        return "timeout"
    return re.sub(r"[^a-z0-9]+", "-", reason.lower()).strip("-") or "unknown"


def type_label(job_type: str) -> str:
    return job_type if handlers.lookup(job_type) is not None else UNKNOWN_TYPE


class Metrics:
    """A supervisor observer keeping the metrics and serving them over HTTP."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.registry = CollectorRegistry(auto_describe=True)
        self._declare()
        self.next_sample_at = 0.0
        self.sampled_queues: set[str] = set()
        # The (type, key) series each limit gauge has now, to drop those gone.
        self.limit_series: dict[Gauge, set[tuple[str, str]]] = {}
        self.running_labels: set[tuple[str, str]] = set()
        self.server: Optional[Any] = None
        self._serve(*parse_address(address))

    @classmethod
    def from_config(cls, config: Any) -> Optional["Metrics"]:
        return cls(config.metrics_address) if config.metrics_address else None

    def _declare(self) -> None:
        registry = self.registry
        self.jobs = Counter("prefork_jobs", "Jobs finished by this supervisor's children.",
                            ["queue", "type", "outcome"], registry=registry)
        self.in_progress = Gauge("prefork_jobs_in_progress", "Jobs the children are running now.",
                                 ["queue", "type"], registry=registry)
        self.duration = Histogram("prefork_job_duration_seconds", "Seconds from a job's claim to "
                                  "its finish, every outcome.", ["queue", "type"],
                                  buckets=DURATION_BUCKETS, registry=registry)
        self.workers_alive = Gauge("prefork_workers_alive", "Children working or ready to work "
                                   "(not stopping).", registry=registry)
        self.workers_target = Gauge("prefork_workers_target", "Children the supervisor keeps.",
                                    registry=registry)
        self.worker_exits = Counter("prefork_worker_exits", "Children that exited, by reason.",
                                    ["reason"], registry=registry)
        self.queue_jobs = Gauge("prefork_queue_jobs", "Jobs per queue and state (ready: due now).",
                                ["queue", "state"], registry=registry)
        self.oldest_ready = Gauge("prefork_queue_oldest_ready_age_seconds", "How long the oldest "
                                  "due job of the queue has waited (0: none).", ["queue"],
                                  registry=registry)
        self.sampled_at = Gauge("prefork_queue_sampled_timestamp_seconds", "When the queue "
                                "figures were read (Unix time).", registry=registry)
        self.limit_running = Gauge("prefork_limit_running", "Jobs of a limited group (type, "
                                   "concurrency key) running now.", ["type", "key"],
                                   registry=registry)
        self.limit_waiting = Gauge("prefork_limit_waiting", "Due jobs of a limited group "
                                   "waiting to start.", ["type", "key"], registry=registry)
        self.limit_concurrency = Gauge("prefork_limit_concurrency", "A limited group's "
                                       "concurrency limit.", ["type", "key"], registry=registry)
        self.workflows = Gauge("prefork_workflows", "Outermost workflows by state (running, "
                               "dead, cancelled; not done).", ["state"], registry=registry)
        self.limit_groups = Gauge("prefork_limit_groups", "Limited groups with jobs running "
                                  "or waiting (the per-group series show the "
                                  f"{MAX_LIMIT_GROUPS} busiest).", registry=registry)

    # -- serving -----------------------------------------------------------------

    def _serve(self, host: str, port: int) -> None:
        try:
            self.server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UserError(f"cannot serve metrics at {self.address}: {reason}") from None
        os.register_at_fork(after_in_child=self._close_in_child)
        if not is_loopback(host):
            event("metrics_not_on_loopback", level=logging.WARNING, address=self.address)
        event("metrics_serving", address=self.address)

    def _close_in_child(self) -> None:
        """A forked child must not hold the port (nor accept on it): close our copy."""
        if self.server is not None:
            self.server.socket.close()
            self.server = None

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    # -- the observer protocol --------------------------------------------------------

    def notify(self, name: str, fields: Mapping[str, Any]) -> None:
        if name == "job_finished":
            self._job_finished(fields)
        elif name == "worker_exited":
            self.worker_exits.labels(reason_label(fields["reason"])).inc()
        elif name == "reloaded" and fields["config"].metrics_address != self.address:
            event("metrics_address_unchanged", level=logging.WARNING, address=self.address,
                  advice="a new metrics_address takes effect at the next start")
        elif name == "stopped":
            self.close()

    def _job_finished(self, fields: Mapping[str, Any]) -> None:
        labels = (fields["queue"], type_label(fields["type"]))
        self.jobs.labels(*labels, fields["outcome"]).inc()
        self.duration.labels(*labels).observe(fields["seconds"])

    def next_deadline(self) -> float:
        return self.next_sample_at

    def tick(self, now: float, view: "SupervisorView") -> None:
        self._count_workers(view)
        if now >= self.next_sample_at:
            sampled = self._sample_queues(view)
            # A read the database did not answer is tried again soon, not in 15 s.
            self.next_sample_at = now + (SAMPLE_INTERVAL if sampled else SAMPLE_RETRY)
            self._sample_limits(view)
            self._sample_workflows(view)

    def _count_workers(self, view: "SupervisorView") -> None:
        self.workers_alive.set(view.workers_alive)
        self.workers_target.set(view.workers_target)
        running = collections.Counter((queue, type_label(job_type))
                                      for queue, job_type in view.running_jobs())
        for labels in self.running_labels - set(running):
            self.in_progress.remove(*labels)
        for labels, count in running.items():
            self.in_progress.labels(*labels).set(count)
        self.running_labels = set(running)

    def _sample_queues(self, view: "SupervisorView") -> bool:
        """Read the queue figures; False when the database did not answer."""
        stats = view.queue_stats(view.queues)
        if stats is None:
            return False   # the database is away: the figures stay, their timestamp says their age
        for gone in self.sampled_queues - set(stats):
            self.oldest_ready.remove(gone)
            for state in QUEUE_STATES:
                self.queue_jobs.remove(gone, state)
        for queue, figures in stats.items():
            for state in QUEUE_STATES:
                self.queue_jobs.labels(queue, state).set(figures[state])
            self.oldest_ready.labels(queue).set(figures["oldest_ready_age"])
        self.sampled_queues = set(stats)
        self.sampled_at.set(time.time())
        return True

    def _sample_workflows(self, view: "SupervisorView") -> None:
        states = view.workflow_states()
        if states is None:
            return   # the database is away: as the queue figures, they stay
        for state in WORKFLOW_STATES:
            self.workflows.labels(state).set(states.get(state, 0))

    def _sample_limits(self, view: "SupervisorView") -> None:
        usage = view.limit_usage()
        if usage is None:
            return   # the database is away: as the queue figures, they stay
        self.limit_groups.set(len(usage))
        shown = busiest(usage)
        figures = {self.limit_running: {(g.job_type, g.key): g.running for g in shown},
                   self.limit_waiting: {(g.job_type, g.key): g.waiting for g in shown},
                   self.limit_concurrency: {(g.job_type, g.key): g.concurrency for g in shown
                                            if g.concurrency is not None}}
        for gauge, values in figures.items():
            for gone in self.limit_series.get(gauge, set()) - set(values):
                gauge.remove(*gone)
            for labels, value in values.items():
                gauge.labels(*labels).set(value)
            self.limit_series[gauge] = set(values)


def busiest(usage: list[LimitUsage]) -> list[LimitUsage]:
    """The MAX_LIMIT_GROUPS groups with the most jobs running or waiting (ties by
    type and key, so that the same ones stay shown from one sample to the next)."""
    ranked = sorted(usage, key=lambda group: (-(group.running + group.waiting),
                                              group.job_type, group.key))
    return ranked[:MAX_LIMIT_GROUPS]
