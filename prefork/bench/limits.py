"""The limit scenarios of `prefork-queue bench --limits`: one supervisor with the
largest worker count runs the app prefork/bench/limited_jobs.py (two limited
no-op types besides the plain ones) on the scratch queue, and

- concurrency: `jobs` no-op jobs spread over KEYS concurrency keys in turn, first
  of a type without a limit (bench.noop), then of bench.keyed (1 running per
  key): jobs/s of each and their ratio; and, sampled at each of the bench's
  polls, the most reserved jobs of one key (a slot is a reserved job: 1 when the
  limit holds, more without it);
- rate: a backlog of rate x rate_seconds jobs of bench.rated in one group: jobs/s,
  and the achieved rate of starts against the configured one. A new group's
  bucket holds one token, so n starts take (n - 1) / rate seconds: the achieved
  rate is (n - 1) / (last start - first start), from the handlers' clock; and
  from the enqueue's commit to the first start (the bucket's clock starts at the
  first claim after it), so n starts never take less than (n - 1) / rate.

Every group's concurrency key starts with the scratch queue's name, so the bench
deletes the groups (and the two types' published rules) afterwards.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict

from ..limits.rules import Rate
from ..progress import Progress
from .database import BenchDatabase
from .jobs import KEY_LIMIT, KEYED, LIMITS_APP, NOOP, RATE_ENV, RATED, STARTS_FILE_ENV
from .measure import ProcessWatch, Throughput, measure_throughput, noop_batch, read_numbers
from .processes import BenchError, bench_supervisor

KEYS = 100
LIMITED_TYPES = (KEYED, RATED)


@dataclass(frozen=True)
class LimitPlan:
    workers: int
    jobs: int                 # of each concurrency run
    payload_bytes: int
    max_payload_bytes: int
    rate: Rate
    rate_seconds: float       # how long the rate's backlog lasts

    @property
    def rate_jobs(self) -> int:
        return max(2, round(self.rate.per_second * self.rate_seconds))

    @property
    def total_jobs(self) -> int:
        return 2 * self.jobs + self.rate_jobs


class GroupWatch:
    """A ProcessWatch that also samples the most reserved jobs of one limit group."""

    def __init__(self, watch: ProcessWatch, db: BenchDatabase, queue: str) -> None:
        self.watch, self.db, self.queue = watch, db, queue
        self.most = 0

    def __call__(self) -> None:
        self.watch()
        self.most = max(self.most, self.db.most_reserved_per_group(self.queue))

    def cpu_seconds(self) -> Dict[str, float]:
        return self.watch.cpu_seconds()


class LimitScenarios:
    def __init__(self, plan: LimitPlan, db: BenchDatabase, env: Dict[str, str], tmp: Path,
                 queue: str, server: Any, progress: Progress,
                 phase: Callable[[str], None]) -> None:
        self.plan, self.db, self.queue, self.server = plan, db, queue, server
        self.progress, self.phase = progress, phase
        self.starts_file = tmp / "rated-starts"
        self.log_path = tmp / "supervisor-limits.log"
        self.env = {**env, RATE_ENV: str(plan.rate), STARTS_FILE_ENV: str(self.starts_file)}

    def run(self) -> Dict[str, Any]:
        """{"concurrency": figures, "rate": figures}."""
        supervisor = bench_supervisor(self.plan.workers, self.queue, self.env, self.log_path,
                                      app=LIMITS_APP)
        try:
            supervisor.start()
            supervisor.wait_idle(self.plan.workers)
            watch = ProcessWatch(supervisor, self.server)
            free, free_most = self.keyed_run(NOOP, "no limit", watch)
            limited, limited_most = self.keyed_run(KEYED, f"{KEY_LIMIT} per key", watch)
            rate = self.rate_run(watch)
        finally:
            supervisor.stop()
        return {"concurrency": self.concurrency_figures(free, free_most, limited, limited_most),
                "rate": rate}

    def keyed_run(self, job_type: str, what: str,
                  watch: ProcessWatch) -> tuple[Throughput, int]:
        """The concurrency run of `job_type`: its throughput, and the most reserved
        jobs of one key seen."""
        self.phase(f"limits: {self.plan.jobs:,} jobs over {KEYS} keys, {what}")
        keys = [f"{self.queue}:{number}" for number in range(KEYS)]
        batch = noop_batch(self.plan.jobs, self.plan.payload_bytes, self.queue,
                           self.plan.max_payload_bytes, job_type=job_type, keys=keys)
        sampled = GroupWatch(watch, self.db, self.queue)
        throughput = measure_throughput(self.db, self.queue, batch, sampled, self.progress)
        self.check_limited(job_type, self.plan.jobs)
        return throughput, sampled.most

    def check_limited(self, job_type: str, jobs: int) -> None:
        """The run's jobs were limited (their rule published before the enqueue) when
        their type has a rule, else not; then delete them."""
        limited = self.db.limited_done(self.queue)
        self.db.delete_queue(self.queue)
        expected = 0 if job_type == NOOP else jobs
        if limited != expected:
            raise BenchError(f"{limited} of the {jobs} {job_type} jobs were enqueued as "
                             f"limited, not {expected}: was the rule published at start?")

    def concurrency_figures(self, free: Throughput, free_most: int, limited: Throughput,
                            limited_most: int) -> Dict[str, Any]:
        return {"workers": self.plan.workers, "jobs": self.plan.jobs, "keys": KEYS,
                "limit": KEY_LIMIT, "jobs_per_s": limited.jobs_per_s,
                "unlimited_jobs_per_s": free.jobs_per_s,
                "ratio": limited.jobs_per_s / free.jobs_per_s,
                "most_reserved_per_key": limited_most,
                "unlimited_most_reserved_per_key": free_most,
                "stmts_per_job": limited.per_job("Questions"),
                "unlimited_stmts_per_job": free.per_job("Questions")}

    def rate_run(self, watch: ProcessWatch) -> Dict[str, Any]:
        rate, jobs = self.plan.rate, self.plan.rate_jobs
        self.phase(f"limits: {jobs:,} jobs at {rate}")
        batch = noop_batch(jobs, self.plan.payload_bytes, self.queue,
                           self.plan.max_payload_bytes, job_type=RATED, keys=[self.queue])
        throughput = measure_throughput(self.db, self.queue, batch, watch, self.progress,
                                        expected_seconds=(jobs - 1) / rate.per_second)
        self.check_limited(RATED, jobs)
        starts = read_numbers(self.starts_file)
        if len(starts) != jobs:
            raise BenchError(f"{jobs} rated jobs ran but {len(starts)} starts were written")
        span = max(starts) - min(starts)
        achieved = (jobs - 1) / span if span > 0 else None
        return {"workers": self.plan.workers, "jobs": jobs, "rate": str(rate),
                "configured_per_s": rate.per_second, "achieved_per_s": achieved,
                "achieved_pct": None if achieved is None else 100 * achieved / rate.per_second,
                "first_start_s": min(starts) - throughput.committed_at,
                "starts_span_s": span, "jobs_per_s": throughput.jobs_per_s,
                "stmts_per_job": throughput.per_job("Questions")}
