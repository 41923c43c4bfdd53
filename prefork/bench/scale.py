"""The scale scenarios of `prefork-queue bench --scale` (MySQL): how the supervisor's
throughput holds as the work grows past one queue, one supervisor and no-op jobs.
Each scenario is a row of figures against a reference measured in the same run
(scale_report.py says what each means and the issue's target):

- many queues: workers listing QUEUES queues, the jobs in the last one, against
  the same jobs in the first;
- many workers: MANY_WORKERS workers against BASE_WORKERS;
- many supervisors: SUPERVISORS supervisors of WORKERS_EACH workers against one
  of SUPERVISORS x WORKERS_EACH, and the idle statements/s of each setup;
- slow jobs: SLOW_SECONDS jobs, then LONG_SECONDS jobs (fewer: a whole number of
  waves of BASE_WORKERS), with BASE_WORKERS workers against the ideal (workers /
  duration);
- fork per job: --max-items 1 with BASE_WORKERS workers (no reference);
- delayed: `delayed` jobs due in an hour in the worked queue, against none, and
  the idle load (statements, index entries read, server CPU) of each;
- effects: `jobs` jobs each writing one row inside job.transaction(), with
  BASE_WORKERS workers, against the durable single-row commit rate of as many
  connections (each its own process: BEGIN; INSERT; COMMIT in a loop) over
  EFFECTS_WINDOW seconds; the bench creates the table and drops it afterwards;
- bulk enqueue: Store.enqueue_many of `jobs` jobs against a bare multi-row
  INSERT of the same rows (no supervisor running);
- enqueue one: Client.enqueue in a loop against the fastest installed peer's
  one-job enqueue (enqueue_one.py; no supervisor running).

Every scratch queue's name starts with the bench's scratch queue (scale_queues()),
so the bench deletes them afterwards."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..config import Config
from ..jobs import new_job
from ..store.mysql.bench import commit_loop
from ..progress import Progress
from .database import BenchDatabase
from .enqueue_one import EnqueueOne, enqueue_calls
from .jobs import EFFECT, SLEEP
from .measure import (
    FINISH_POLL,
    ProcessWatch,
    Throughput,
    measure_idle_rates,
    measure_throughput,
    noop_batch,
    wait_settled,
)
from .processes import BaselinePool, BenchError, SupervisorProcess, bench_supervisor
from .scale_names import SCENARIO_NAMES

BASE_WORKERS = 8
MANY_WORKERS = 32
QUEUES = 20
SUPERVISORS, WORKERS_EACH = 4, 4
SLOW_SECONDS = 0.05
LONG_SECONDS = 1.0
DELAY_SECONDS = 3600.0
EFFECTS_WINDOW = 3.0


def scale_queues(queue: str) -> List[str]:
    """Every scratch queue of the scenarios besides `queue` itself."""
    return [f"{queue}-q{number}" for number in range(1, QUEUES + 1)] + [f"{queue}-bulk"]


@dataclass(frozen=True)
class ScalePlan:
    jobs: int                 # no-op jobs of each throughput run, and of the bulk enqueue
    slow_jobs: int            # jobs of the slow-jobs and fork-per-job runs
    delayed: int              # delayed jobs of the delayed scenario
    payload_bytes: int
    max_payload_bytes: int
    scenarios: Tuple[str, ...] = SCENARIO_NAMES   # which to run (in SCENARIO_NAMES' order)

    @property
    def total_jobs(self) -> int:
        """Jobs run by workers in all, for the progress bar."""
        jobs = {"many_queues": 2 * self.jobs, "many_workers": 2 * self.jobs,
                "many_supervisors": 2 * self.jobs, "slow_jobs": self.slow_jobs,
                "slow_jobs_1s": self.long_jobs, "fork_per_job": self.slow_jobs,
                "delayed": 2 * self.jobs, "effects": self.jobs, "bulk_enqueue": 0,
                "enqueue_one": 0}
        return sum(jobs[name] for name in self.scenarios)

    @property
    def long_jobs(self) -> int:
        """Jobs of LONG_SECONDS: BASE_WORKERS for each 100 slow jobs (at least one wave)."""
        return BASE_WORKERS * max(1, self.slow_jobs // 100)


class SupervisorGroup:
    """Several supervisors watched as one (ProcessWatch's `processes`)."""

    def __init__(self, supervisors: Sequence[SupervisorProcess]) -> None:
        self.supervisors = list(supervisors)

    def check_alive(self) -> None:
        for supervisor in self.supervisors:
            supervisor.check_alive()

    def memory(self) -> Dict[str, Optional[float]]:
        samples = [supervisor.memory() for supervisor in self.supervisors]
        return {name: max((value for sample in samples
                           if (value := sample.get(name)) is not None), default=None)
                for name in ("parent_rss", "child_rss", "child_uss")}

    def cpu_seconds(self) -> Dict[str, float]:
        seconds = [supervisor.cpu_seconds() for supervisor in self.supervisors]
        return {name: sum(each[name] for each in seconds) for name in ("parent", "children")}


class ScaleScenarios:
    def __init__(self, plan: ScalePlan, config: Config, db: BenchDatabase, env: Dict[str, str],
                 tmp: Path, queue: str, server: Any, progress: Progress,
                 phase: Callable[[str], None]) -> None:
        self.plan, self.config, self.db, self.env, self.tmp = plan, config, db, env, tmp
        self.queue, self.server, self.progress, self.phase = queue, server, progress, phase

    def run(self) -> List[Dict[str, Any]]:
        """One row per chosen scenario, in the order of the module's docstring."""
        scenarios: Dict[str, Callable[[], Dict[str, Any]]] = {
            "many_queues": self.many_queues, "many_workers": self.many_workers,
            "many_supervisors": self.many_supervisors,
            "slow_jobs": lambda: self.slow_jobs("slow_jobs", SLOW_SECONDS, self.plan.slow_jobs),
            "slow_jobs_1s": lambda: self.slow_jobs("slow_jobs_1s", LONG_SECONDS,
                                                   self.plan.long_jobs),
            "fork_per_job": self.fork_per_job, "delayed": self.delayed,
            "effects": self.effects, "bulk_enqueue": self.bulk_enqueue,
            "enqueue_one": self.enqueue_one}
        return [scenarios[name]() for name in self.plan.scenarios]

    # -- the scenarios ----------------------------------------------------------------

    def many_queues(self) -> Dict[str, Any]:
        queues = scale_queues(self.queue)[:QUEUES]
        self.phase(f"scale: {QUEUES} queues, {BASE_WORKERS} workers")
        with self.running([self.supervisor(BASE_WORKERS, ",".join(queues), "queues")]) as watch:
            first = self.throughput(queues[0], watch)
            last = self.throughput(queues[-1], watch)
        return row("many_queues", BASE_WORKERS, last, first)

    def many_workers(self) -> Dict[str, Any]:
        runs = {}
        for workers in (BASE_WORKERS, MANY_WORKERS):
            self.phase(f"scale: {workers} workers")
            with self.running([self.supervisor(workers, self.queue, f"{workers}")]) as watch:
                runs[workers] = self.throughput(self.queue, watch)
        return row("many_workers", MANY_WORKERS, runs[MANY_WORKERS], runs[BASE_WORKERS])

    def many_supervisors(self) -> Dict[str, Any]:
        alone, alone_idle = self.supervisors_run(1, SUPERVISORS * WORKERS_EACH)
        many, many_idle = self.supervisors_run(SUPERVISORS, WORKERS_EACH)
        figures = row("many_supervisors", SUPERVISORS * WORKERS_EACH, many, alone)
        figures.update(supervisors=SUPERVISORS, **_idle(many_idle),
                       **_idle(alone_idle, "reference_"))
        return figures

    def supervisors_run(self, count: int,
                        workers: int) -> Tuple[Throughput, Optional[Dict[str, Any]]]:
        self.phase(f"scale: {count} x {workers} workers")
        supervisors = [self.supervisor(workers, self.queue, f"{count}x{workers}-{number}")
                       for number in range(count)]
        with self.running(supervisors) as watch:
            return self.throughput(self.queue, watch), measure_idle_rates(self.db, watch)

    def slow_jobs(self, scenario: str, seconds: float, count: int) -> Dict[str, Any]:
        self.phase(f"scale: {count:,} jobs of {seconds * 1000:g} ms")
        batch = [new_job(SLEEP, {"seconds": seconds}, queue=self.queue)] * count
        with self.running([self.supervisor(BASE_WORKERS, self.queue, scenario)]) as watch:
            slow = self.throughput(self.queue, watch, batch)
        figures = row(scenario, BASE_WORKERS, slow, None)
        ideal = BASE_WORKERS / seconds
        figures.update(job_seconds=seconds, reference_jobs_per_s=ideal,
                       ratio=slow.jobs_per_s / ideal)
        return figures

    def fork_per_job(self) -> Dict[str, Any]:
        self.phase(f"scale: fork per job, {self.plan.slow_jobs:,} jobs")
        supervisor = self.supervisor(BASE_WORKERS, self.queue, "fork", ("--max-items", "1"))
        with self.running([supervisor]) as watch:
            forked = self.throughput(self.queue, watch, self.noop_jobs(self.plan.slow_jobs))
        return row("fork_per_job", BASE_WORKERS, forked, None)

    def delayed(self) -> Dict[str, Any]:
        jobs = self.noop_jobs(self.plan.jobs)
        priority = jobs[0].priority

        def due() -> int:
            return self.db.unfinished_due(self.queue, priority)

        with self.running([self.supervisor(BASE_WORKERS, self.queue, "delayed")]) as watch:
            self.phase(f"scale: {BASE_WORKERS} workers, no delayed jobs")
            empty = self.throughput(self.queue, watch, jobs, due)
            empty_idle = measure_idle_rates(self.db, watch)
            self.phase(f"scale: {self.plan.delayed:,} delayed jobs")
            self.db.bare_insert(self.noop_jobs(self.plan.delayed), DELAY_SECONDS)
            wait_settled(self.server, watch)
            loaded = self.throughput(self.queue, watch, jobs, due)
            loaded_idle = measure_idle_rates(self.db, watch)
        self.db.delete_queue(self.queue)
        figures = row("delayed", BASE_WORKERS, loaded, empty)
        figures.update(delayed=self.plan.delayed, **_idle(loaded_idle),
                       **_idle(empty_idle, "reference_"))
        return figures

    def effects(self) -> Dict[str, Any]:
        self.db.effects_table(True)
        try:
            self.phase(f"scale: {self.plan.jobs:,} jobs writing a row each")
            batch = [new_job(EFFECT, {}, queue=self.queue)] * self.plan.jobs
            with self.running([self.supervisor(BASE_WORKERS, self.queue, "effects")]) as watch:
                ours = self.throughput(self.queue, watch, batch)
            written = self.db.effects_written()
            if written != self.plan.jobs:
                raise BenchError(f"{self.plan.jobs} effect jobs ran but wrote {written} rows")
            self.phase(f"scale: single-row commits on {BASE_WORKERS} connections")
            commits = self.commit_rate()
        finally:
            self.db.effects_table(False)
        figures = row("effects", BASE_WORKERS, ours, None)
        figures.update(reference_jobs_per_s=commits, ratio=ours.jobs_per_s / commits)
        return figures

    def commit_rate(self) -> float:
        """Rows per second BASE_WORKERS processes commit one by one, over EFFECTS_WINDOW."""
        pool = BaselinePool(self.config, self.queue, BASE_WORKERS, commit_loop,
                            label="commit loop")
        try:
            pool.start()
            pool.wait_ready()
            watch = ProcessWatch(pool, self.server)
            before, started = self.db.effects_written(), time.monotonic()
            while time.monotonic() - started < EFFECTS_WINDOW:
                watch()
                time.sleep(FINISH_POLL)
            return (self.db.effects_written() - before) / (time.monotonic() - started)
        finally:
            pool.stop()

    def bulk_enqueue(self) -> Dict[str, Any]:
        queue = scale_queues(self.queue)[-1]   # nobody works it
        jobs = self.noop_jobs(self.plan.jobs, queue)
        self.phase(f"scale: bulk enqueue of {len(jobs):,} jobs")
        ours = _timed(lambda: self.db.enqueue_many(jobs), len(jobs))
        self.db.delete_queue(queue)
        bare = _timed(lambda: self.db.bare_insert(jobs), len(jobs))
        self.db.delete_queue(queue)
        return {"scenario": "bulk_enqueue", "workers": 0, "jobs": len(jobs),
                "jobs_per_s": ours, "reference_jobs_per_s": bare, "ratio": ours / bare,
                "stmts_per_job": None}

    def enqueue_one(self) -> Dict[str, Any]:
        queue = scale_queues(self.queue)[-1]   # nobody works it
        return EnqueueOne(self.db, self.env, queue, enqueue_calls(self.plan.jobs),
                          self.plan.payload_bytes, self.tmp / "enqueue-one.log",
                          self.phase).run()

    # -- the parts --------------------------------------------------------------------

    def supervisor(self, workers: int, queues: str, name: str,
                   extra_args: Sequence[str] = ()) -> Tuple[SupervisorProcess, int]:
        """A supervisor of `workers` on `queues` (comma-separated), and its worker count."""
        return bench_supervisor(workers, queues, self.env,
                                self.tmp / f"supervisor-scale-{name}.log",
                                extra_args=extra_args), workers

    def running(self, supervisors: List[Tuple[SupervisorProcess, int]]) -> "Running":
        return Running(supervisors, self.server)

    def noop_jobs(self, count: int, queue: Optional[str] = None) -> list:
        return noop_batch(count, self.plan.payload_bytes, queue or self.queue,
                          self.plan.max_payload_bytes)

    def throughput(self, queue: str, watch: ProcessWatch, batch: Optional[list] = None,
                   unfinished: Optional[Callable[[], int]] = None) -> Throughput:
        """A throughput run of `batch` (default: --jobs no-op jobs) in `queue`, whose
        rows are deleted afterwards, the delayed scenario's with the rest."""
        batch = batch or self.noop_jobs(self.plan.jobs, queue)
        throughput = measure_throughput(self.db, queue, batch, watch, self.progress,
                                        unfinished=unfinished)
        if unfinished is None:
            self.db.delete_queue(queue)
        return throughput


class Running:
    """`with`: the supervisors started and their workers idle; a ProcessWatch of
    them; stopped at the end, whatever happens."""

    def __init__(self, supervisors: List[Tuple[SupervisorProcess, int]], server: Any) -> None:
        self.supervisors, self.server = supervisors, server

    def __enter__(self) -> ProcessWatch:
        try:
            for supervisor, _ in self.supervisors:
                supervisor.start()
            for supervisor, workers in self.supervisors:
                supervisor.wait_idle(workers)
        except BaseException:
            self.__exit__()
            raise
        return ProcessWatch(SupervisorGroup([each for each, _ in self.supervisors]), self.server)

    def __exit__(self, *exc_info: object) -> None:
        for supervisor, _ in self.supervisors:
            supervisor.stop()


def row(scenario: str, workers: int, measured: Throughput,
        reference: Optional[Throughput]) -> Dict[str, Any]:
    return {"scenario": scenario, "workers": workers, "jobs": measured.jobs,
            "jobs_per_s": measured.jobs_per_s,
            "reference_jobs_per_s": reference.jobs_per_s if reference else None,
            "ratio": measured.jobs_per_s / reference.jobs_per_s if reference else None,
            "stmts_per_job": measured.per_job("Questions"),
            "client_cpu_ms_per_job": measured.cpu_ms_per_job["parent"]
            + measured.cpu_ms_per_job["children"],
            "server_cpu_ms_per_job": measured.cpu_ms_per_job.get("server")}


def _idle(rates: Optional[Dict[str, Any]], prefix: str = "") -> Dict[str, Any]:
    rates = rates or {"stmts_per_s": None, "rows_read_per_s": None, "server_cpu_ms_per_s": None}
    return {f"{prefix}idle_{name}": value for name, value in rates.items()}


def _timed(action: Callable[[], Any], jobs: int) -> float:
    """Jobs per second of one call of `action` on `jobs` jobs."""
    started = time.monotonic()
    action()
    return jobs / (time.monotonic() - started)
