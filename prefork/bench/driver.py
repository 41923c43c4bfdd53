"""One bench invocation: for each worker count, the real supervisor and the textbook
baseline on the same scratch queue, then (optionally) the limit scenarios and a run
on a big table; the scratch rows, files and processes are gone afterwards, even
after Ctrl-C."""
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from ..errors import UserError
from ..limits.rules import Rate, parse_rate
from ..logs import error_class
from ..progress import Progress
from ..store import driver_errors
from .backlog import Backlog, BacklogPlan
from .cross_host import run_cross_host
from .database import BenchDatabase
from .jobs import DEFAULT_RATE, NOOP, PICKUP_FILE_ENV
from .limits import LIMITED_TYPES, LimitPlan, LimitScenarios
from .measure import (
    PickupPlan,
    ProcessWatch,
    Throughput,
    measure_background,
    measure_idle_load,
    measure_pickups,
    measure_pool,
    measure_throughput,
    noop_batch,
    wait_settled,
)
from .processes import BaselinePool, bench_supervisor, ceiling_pool, supervisor_env
from .report import MYSQL_NOTES, MYSQL_ONLY, NOTES, ROW_KEYS, make_row, render_json, render_table
from .scale import ScaleScenarios, scale_queues
from .scale_parts import ScalePlan, chosen_claimers
from .scale_report import with_targets
from .topologies import TopologyPlan, run_topologies
from .workflows import WorkflowPlan, WorkflowScenarios, callback_queue

RUNG_GAP = (0.02, 0.06)     # seconds between pickups with the doorbell
LABEL_WIDTH = 26


@dataclass
class Plan:
    workers: List[int]
    jobs: int
    payload_bytes: int
    pickups: int
    done_rows: int
    as_json: bool
    limits: bool = False            # also the limit scenarios (limits.py)
    rate: Rate = parse_rate(DEFAULT_RATE)
    rate_seconds: float = 10.0
    scale: Tuple[str, ...] = ()     # also these scale scenarios (scale.py), MySQL only
    slow_jobs: int = 0              # their sizes (the CLI's --slow-jobs and --delayed)
    delayed: int = 0
    backlog: int = 0                # also the backlog scenario (backlog.py), MySQL only
    cross_host: bool = False        # also the cross-host pickups (cross_host.py)
    cluster_dsns: Tuple[str, ...] = ()   # also the cluster's topologies (topologies.py)
    workflows: bool = False         # also the workflow scenarios (workflows.py)
    group_size: int = 10_000        # their sizes (the CLI's --group-size, --groups,
    groups: int = 5                 # --chain-steps)
    chain_steps: int = 1_000


@dataclass
class OursRun:
    throughput: Throughput
    memory: dict
    pickups: List[float] = field(default_factory=list)          # rung: the doorbell
    polled_pickups: List[float] = field(default_factory=list)   # found by the poll
    idle_stmts_per_s: Optional[float] = None
    background_stmts_per_s: Optional[float] = None


class Bench:
    def __init__(self, plan, config):
        self.plan, self.config = plan, config
        self.db = BenchDatabase(config)
        for flag, wanted in (("--done-rows", plan.done_rows), ("--scale", plan.scale),
                             ("--backlog", plan.backlog), ("--cluster-dsn", plan.cluster_dsns)):
            if wanted and not self.db.is_mysql:
                self.db.close()
                raise UserError(f"{flag} is MySQL-only")
        if len(plan.cluster_dsns) == 1:
            self.db.close()
            raise UserError("--cluster-dsn: name every node of the cluster, one flag each "
                            "(at least 2)")
        self.server = self.db.server_process()
        self.queue = f"bench-{secrets.token_hex(4)}"
        self.done_queue = f"{self.queue}-done"
        self.tmp = Path(tempfile.mkdtemp(prefix="prefork-bench-"))
        latency_file = str(self.tmp / "pickup-latencies")
        self.env = supervisor_env(config, {PICKUP_FILE_ENV: latency_file})
        # Without the doorbell a job waits for the next poll: a random gap over a whole
        # poll interval stands for jobs arriving at random times.
        self.rung = PickupPlan(plan.pickups, RUNG_GAP, True, latency_file)
        self.polled = PickupPlan(plan.pickups, (0.02, 0.02 + config.poll_interval), False,
                                 latency_file)
        self.batch = noop_batch(plan.jobs, plan.payload_bytes, self.queue, config.max_payload_bytes)
        self.limit_plan = LimitPlan(max(plan.workers), plan.jobs, plan.payload_bytes,
                                    config.max_payload_bytes, plan.rate, plan.rate_seconds)
        self.backlog_plan = BacklogPlan(plan.backlog, max(plan.workers), plan.jobs,
                                        plan.payload_bytes, config.max_payload_bytes)
        self.topology_plan = TopologyPlan(plan.cluster_dsns, max(plan.workers), plan.jobs,
                                          plan.payload_bytes)
        self.scale_plan = ScalePlan(plan.jobs, plan.slow_jobs, plan.delayed, plan.payload_bytes,
                                    config.max_payload_bytes, plan.scale,
                                    chosen_claimers(config))
        self.workflow_plan = WorkflowPlan(max(plan.workers), plan.group_size, plan.groups,
                                          plan.chain_steps, plan.payload_bytes,
                                          config.max_payload_bytes)
        self.progress = Progress(self._progress_total(), "bench".ljust(LABEL_WIDTH))
        self.started = time.monotonic()

    def _progress_total(self):
        # ours, and on MySQL the textbook baseline and the ceiling
        per_count = self.plan.jobs * (3 if self.db.is_mysql else 1) + 2 * self.plan.pickups
        return (per_count * len(self.plan.workers)
                + (self.limit_plan.total_jobs if self.plan.limits else 0)
                + (self.scale_plan.total_jobs if self.plan.scale else 0)
                + (self.workflow_plan.total_jobs if self.plan.workflows else 0)
                + (self.backlog_plan.counted if self.plan.backlog else 0)
                + (self.plan.pickups if self.plan.cross_host else 0)
                + (self.topology_plan.total_jobs if self.plan.cluster_dsns else 0)
                + (self.plan.jobs if self.plan.done_rows else 0))

    def _phase(self, text):
        """A phase begins: its line on stderr, whether or not the bar is drawn (a run of
        minutes into a log or a pipe is not silent), and the bar's label."""
        self.progress.label = text[:LABEL_WIDTH].ljust(LABEL_WIDTH)
        after_bar = "\n" if self.progress.enabled and self.progress.done else ""
        print(f"{after_bar}prefork-queue bench: {text} ({self.progress.done:,} jobs so far, "
              f"{time.monotonic() - self.started:.0f} s elapsed)", file=sys.stderr, flush=True)

    # -- the runs -------------------------------------------------------------------

    def run(self):
        rows = [self.one_worker_count(workers) for workers in self.plan.workers]
        cross_host = self.cross_host_run() if self.plan.cross_host else None
        topologies = self.topologies_run() if self.plan.cluster_dsns else None
        limits = self.limit_scenarios() if self.plan.limits else None
        scale = self.scale_scenarios() if self.plan.scale else None
        workflows = self.workflow_scenarios() if self.plan.workflows else None
        backlog = self.backlog_run(rows) if self.plan.backlog else None
        done_rows = self.big_table_run(rows) if self.plan.done_rows else None
        self._phase("done")
        report = self.report(rows, cross_host, limits, scale, backlog, done_rows)
        return {**report, "topologies": topologies, "workflows": workflows}

    def one_worker_count(self, workers):
        ours = self.run_ours(workers)
        if not self.db.is_mysql:
            return make_row(workers, ours, None, None)
        return make_row(workers, ours, self.run_baseline(workers), self.run_ceiling(workers))

    def run_ours(self, workers, extras=True):
        """The real supervisor: throughput, then (extras) pickup latency and idle load."""
        self._phase(f"{_workers(workers)}: ours, {self.plan.jobs:,} jobs")
        background = measure_background(self.db) if extras else None
        supervisor = bench_supervisor(workers, self.queue, self.env,
                                      self.tmp / f"supervisor-{workers}.log")
        try:
            supervisor.start()
            supervisor.wait_idle(workers)
            watch = ProcessWatch(supervisor, self.server)
            throughput = measure_throughput(self.db, self.queue, self.batch, watch, self.progress)
            run = OursRun(throughput, dict(watch.peaks), background_stmts_per_s=background)
            if extras:
                self._phase(f"{_workers(workers)}: ours, {2 * self.plan.pickups} pickups")
                run.pickups = measure_pickups(self.db, self.queue, self.rung, watch, self.progress)
                run.polled_pickups = measure_pickups(self.db, self.queue, self.polled, watch,
                                                     self.progress)
                if self.db.is_mysql:   # SQLite has no server to measure
                    self._phase(f"{_workers(workers)}: ours, idle load")
                run.idle_stmts_per_s = measure_idle_load(self.db, watch)
        finally:
            supervisor.stop()
        self.db.delete_queue(self.queue)
        return run

    def run_baseline(self, workers):
        return self.run_pool(workers, BaselinePool(self.config, self.queue, workers))

    def run_ceiling(self, workers):
        return self.run_pool(workers, ceiling_pool(self.config, self.queue, workers))

    def run_pool(self, workers, pool):
        self._phase(f"{_workers(workers)}: {pool.label}, {self.plan.jobs:,} jobs")
        throughput = measure_pool(self.db, self.queue, self.batch, pool, self.server,
                                  self.progress)
        self.db.delete_queue(self.queue)
        return throughput

    def cross_host_run(self):
        """--cross-host: pickups with no same-host doorbell, the largest worker count."""
        return run_cross_host(max(self.plan.workers), self.rung, self.db, self.env, self.tmp,
                              self.queue, self.server, self.progress, self._phase)

    def topologies_run(self):
        """--cluster-dsn: the cluster's two topologies against this server."""
        return run_topologies(self.topology_plan, self.config, self.queue, self.tmp,
                              self.progress, self._phase)

    def limit_scenarios(self):
        """--limits: the concurrency and the rate scenario, before any big table."""
        return LimitScenarios(self.limit_plan, self.db, self.env, self.tmp, self.queue,
                              self.server, self.progress, self._phase).run()

    def scale_scenarios(self):
        """--scale: a row per scenario, before any big table."""
        return with_targets(ScaleScenarios(self.scale_plan, self.config, self.db, self.env,
                                           self.tmp, self.queue, self.server, self.progress,
                                           self._phase).run())

    def workflow_scenarios(self):
        """--workflows: the group and the chain, before any big table."""
        return WorkflowScenarios(self.workflow_plan, self.db, self.env, self.tmp, self.queue,
                                 self.server, self.progress, self._phase).run()

    def backlog_run(self, rows):
        """--backlog: the largest worker count through a deep backlog, against its row."""
        empty = next(row["ours_jobs_per_s"] for row in rows
                     if row["workers"] == self.backlog_plan.workers)
        return Backlog(self.backlog_plan, self.db, self.env, self.tmp, self.queue, self.server,
                       self.progress, self._phase).run(empty)

    def big_table_run(self, rows):
        """--done-rows: fill the table, rerun the largest worker count's throughput."""
        workers = max(self.plan.workers)
        self._phase(f"filling {self.plan.done_rows:,} done rows")
        for _ in self.db.fill_done(self.done_queue, self.plan.done_rows, NOOP,
                                   self.batch[0].payload_text):
            self.progress.advance(0)
        self._phase("letting the server settle")
        settled = wait_settled(self.server, lambda: self.progress.advance(0))
        ours = self.run_ours(workers, extras=False).throughput.jobs_per_s
        empty = next(row["ours_jobs_per_s"] for row in rows if row["workers"] == workers)
        return {"rows": self.plan.done_rows, "workers": workers, "jobs_per_s": ours,
                "empty_jobs_per_s": empty, "ratio": ours / empty,
                "settled_seconds": None if settled is None else round(settled, 1)}

    def report(self, rows, cross_host, limits, scale, backlog, done_rows):
        backend = "mysql" if self.db.is_mysql else "sqlite"
        return {"backend": backend, "dialect": self.db.dialect, "queue": self.queue,
                "jobs": self.plan.jobs,
                "payload_bytes": self.plan.payload_bytes, "pickups": self.plan.pickups,
                "columns": list(ROW_KEYS), "rows": rows, "limits": limits, "scale": scale,
                "cross_host": cross_host, "backlog": backlog, "done_rows": done_rows,
                "mysql_only": [] if self.db.is_mysql else list(MYSQL_ONLY),
                "notes": list(NOTES + (MYSQL_NOTES if self.db.is_mysql else ()))}

    # -- cleaning up ----------------------------------------------------------------

    def scratch_queues(self):
        return ([self.queue, self.done_queue, callback_queue(self.queue)]
                + (scale_queues(self.queue) if self.plan.scale or self.plan.backlog else []))

    def clean_up(self):
        """Delete the scratch rows on a fresh connection (the bench's own may have been
        interrupted mid-statement) and remove the temporary files. A failure here is
        a warning naming what is left, never in place of the error that stopped us."""
        self.progress.finish()
        self.db.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        try:
            db = BenchDatabase(self.config, check_schema=False)
            try:
                for queue in self.scratch_queues():
                    db.delete_queue(queue)
                if self.plan.scale:   # the effects scenario's table
                    db.effects_table(False)
                if "enqueue_one" in self.plan.scale:   # its peers' scratch database
                    db.peers_database(False)
                if self.plan.limits:   # the limit scenarios' rules and groups
                    db.delete_limits(LIMITED_TYPES, self.queue)
                if self.plan.workflows:   # the workflow scenarios' workflows
                    db.delete_workflows(f"{self.queue}:")
            finally:
                db.close()
        except (UserError,) + driver_errors() as exc:
            reason = str(exc) if isinstance(exc, UserError) else error_class(exc)
            print(f"prefork-queue bench: warning: could not delete the rows of queues "
                  f"{self.queue} and {self.done_queue}: {reason}", file=sys.stderr)


def _workers(count):
    return f"{count} worker{'' if count == 1 else 's'}"


def run_bench(plan, config):
    """Run the bench and print its report; Ctrl-C stops it and still cleans up."""
    previous = signal.signal(signal.SIGINT, _interrupt_once)
    try:
        bench = Bench(plan, config)
        try:
            report = bench.run()
        finally:
            bench.clean_up()
    finally:
        signal.signal(signal.SIGINT, previous)
    print(render_json(report) if plan.as_json else render_table(report))
    return 0


def _interrupt_once(signum, frame):
    """The first Ctrl-C stops the bench; later ones are ignored so the clean-up
    (processes stopped, scratch rows deleted) runs to its end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print("\nprefork-queue bench: interrupted; stopping and cleaning up", file=sys.stderr)
    raise KeyboardInterrupt
