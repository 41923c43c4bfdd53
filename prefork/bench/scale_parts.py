"""What the scale scenarios (scale.py) and the claim designs' rows (scale_designs.py)
share: the plan of a run, its context and parts (a supervisor of N workers, a
throughput run, the durable commit rate of N connections), and the figures of a row."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..config import Config
from ..progress import Progress
from ..store.mysql.bench import commit_loop
from .database import BenchDatabase
from .measure import FINISH_POLL, ProcessWatch, Throughput, measure_throughput, noop_batch
from .processes import BaselinePool, SupervisorProcess, bench_supervisor
from .scale_names import SCENARIO_NAMES

BASE_WORKERS = 8
# The claimer setting's choices: each worker child claims for itself, or the
# supervisor claims for all its idle children. The designs' rows run each.
CLAIMERS = ("worker", "supervisor")
MANY_WORKERS = (BASE_WORKERS, 32, 64)    # the many-workers rows' worker counts
EFFECTS_WORKERS = (BASE_WORKERS, 32)     # the effects rows'
# Jobs of an effects run at most (fewer with a smaller --jobs): each commits on its
# own, at a third of a no-op job's rate or less, and four runs must not take minutes.
EFFECTS_JOBS = 10_000
EFFECTS_WINDOW = 3.0


def chosen_claimers(config: Config) -> Tuple[str, ...]:
    """The designs the designs' rows run: both, unless the claimer setting was given
    (flag, environment or file): then that one alone."""
    return CLAIMERS if config.source("claimer") == "default" else (config.claimer,)


@dataclass(frozen=True)
class ScalePlan:
    jobs: int                 # no-op jobs of each throughput run, and of the bulk enqueue
    slow_jobs: int            # jobs of the slow-jobs and fork-per-job runs
    delayed: int              # delayed jobs of the delayed scenario
    payload_bytes: int
    max_payload_bytes: int
    scenarios: Tuple[str, ...] = SCENARIO_NAMES   # which to run (in SCENARIO_NAMES' order)
    claimers: Tuple[str, ...] = CLAIMERS          # the designs of many_workers and effects

    @property
    def total_jobs(self) -> int:
        """Jobs run by workers (and the ceiling's processes) in all, for the progress bar."""
        designs = len(self.claimers)
        jobs = {"many_queues": 2 * self.jobs,
                "many_workers": self.jobs * len(MANY_WORKERS) * (designs + 1),   # + ceiling
                "many_supervisors": 2 * self.jobs, "slow_jobs": self.slow_jobs,
                "slow_jobs_1s": self.long_jobs, "fork_per_job": self.slow_jobs,
                "delayed": 2 * self.jobs,
                "effects": self.effects_jobs * len(EFFECTS_WORKERS) * designs,
                "bulk_enqueue": 0, "enqueue_one": 0}
        return sum(jobs[name] for name in self.scenarios)

    @property
    def effects_jobs(self) -> int:
        """Jobs of each effects run: `jobs`, at most EFFECTS_JOBS."""
        return min(self.jobs, EFFECTS_JOBS)

    @property
    def long_jobs(self) -> int:
        """Jobs of slow_jobs_1s: BASE_WORKERS for each 100 slow jobs (at least one wave)."""
        return BASE_WORKERS * max(1, self.slow_jobs // 100)


class ScaleParts:
    """A scale run's context (the bench's database, the supervisors' environment, the
    scratch queue, the progress bar) and the parts its scenarios are made of."""

    def __init__(self, plan: ScalePlan, config: Config, db: BenchDatabase, env: Dict[str, str],
                 tmp: Path, queue: str, server: Any, progress: Progress,
                 phase: Callable[[str], None]) -> None:
        self.plan, self.config, self.db, self.env, self.tmp = plan, config, db, env, tmp
        self.queue, self.server, self.progress, self.phase = queue, server, progress, phase

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

    def commit_rate(self, connections: int) -> float:
        """Rows per second `connections` processes commit one by one into the effects
        table (which must exist), over EFFECTS_WINDOW."""
        pool = BaselinePool(self.config, self.queue, connections, commit_loop,
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
