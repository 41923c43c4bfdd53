"""The scale scenarios of `prefork-queue bench --scale` (MySQL): how the supervisor's
throughput holds as the work grows past one queue, one supervisor and no-op jobs.
Each scenario is a row of figures against a reference measured in the same run
(scale_report.py says what each means and the issue's target):

- many queues: workers listing QUEUES queues, the jobs in the last one, against
  the same jobs in the first;
- many workers: rows of their own per claim design (scale_designs.py);
- many supervisors: SUPERVISORS supervisors of WORKERS_EACH workers against one
  of SUPERVISORS x WORKERS_EACH, and the idle statements/s of each setup;
- slow jobs: SLOW_SECONDS jobs, then LONG_SECONDS jobs (fewer: a whole number of
  waves of BASE_WORKERS), with BASE_WORKERS workers against the ideal (workers /
  duration);
- fork per job: --max-items 1 with BASE_WORKERS workers (no reference);
- delayed: `delayed` jobs due in an hour in the worked queue, against none, and
  the idle load (statements, index entries read, server CPU) of each;
- effects: rows of their own per claim design (scale_designs.py);
- bulk enqueue: Store.enqueue_many of `jobs` jobs against a bare multi-row
  INSERT of the same rows (no supervisor running);
- enqueue one: Client.enqueue in a loop against the fastest installed peer's
  one-job enqueue (enqueue_one.py; no supervisor running).

Every scratch queue's name starts with the bench's scratch queue (scale_queues()),
so the bench deletes them afterwards."""
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..jobs import new_job
from .enqueue_one import EnqueueOne, enqueue_calls
from .jobs import SLEEP
from .measure import Throughput, measure_idle_rates, wait_settled
from .scale_designs import effects, many_workers
from .scale_parts import BASE_WORKERS, ScaleParts, row

QUEUES = 20
SUPERVISORS, WORKERS_EACH = 4, 4
SLOW_SECONDS = 0.05
LONG_SECONDS = 1.0
DELAY_SECONDS = 3600.0


def scale_queues(queue: str) -> List[str]:
    """Every scratch queue of the scenarios besides `queue` itself."""
    return [f"{queue}-q{number}" for number in range(1, QUEUES + 1)] + [f"{queue}-bulk"]


class ScaleScenarios(ScaleParts):
    def run(self) -> List[Dict[str, Any]]:
        """The rows of the chosen scenarios, in the order of the module's docstring: one
        each, several for those of the claim designs."""
        one: Dict[str, Callable[[], Dict[str, Any]]] = {
            "many_queues": self.many_queues, "many_supervisors": self.many_supervisors,
            "slow_jobs": lambda: self.slow_jobs("slow_jobs", SLOW_SECONDS, self.plan.slow_jobs),
            "slow_jobs_1s": lambda: self.slow_jobs("slow_jobs_1s", LONG_SECONDS,
                                                   self.plan.long_jobs),
            "fork_per_job": self.fork_per_job, "delayed": self.delayed,
            "bulk_enqueue": self.bulk_enqueue, "enqueue_one": self.enqueue_one}
        several: Dict[str, Callable[[ScaleParts], List[Dict[str, Any]]]] = {
            "many_workers": many_workers, "effects": effects}
        rows: List[Dict[str, Any]] = []
        for name in self.plan.scenarios:
            rows += several[name](self) if name in several else [one[name]()]
        return rows

    # -- the scenarios ----------------------------------------------------------------

    def many_queues(self) -> Dict[str, Any]:
        queues = scale_queues(self.queue)[:QUEUES]
        self.phase(f"scale: {QUEUES} queues, {BASE_WORKERS} workers")
        with self.running([self.supervisor(BASE_WORKERS, ",".join(queues), "queues")]) as watch:
            first = self.throughput(queues[0], watch)
            last = self.throughput(queues[-1], watch)
        return row("many_queues", BASE_WORKERS, last, first)

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


def _idle(rates: Optional[Dict[str, Any]], prefix: str = "") -> Dict[str, Any]:
    rates = rates or {"stmts_per_s": None, "rows_read_per_s": None, "server_cpu_ms_per_s": None}
    return {f"{prefix}idle_{name}": value for name, value in rates.items()}


def _timed(action: Callable[[], Any], jobs: int) -> float:
    """Jobs per second of one call of `action` on `jobs` jobs."""
    started = time.monotonic()
    action()
    return jobs / (time.monotonic() - started)
