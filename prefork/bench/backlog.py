"""The backlog scenario of `prefork-queue bench --backlog N` (MySQL): N ready no-op
jobs spread over QUEUES queues and PRIORITIES priorities (inserted with the bare
multi-row INSERT, in chunks), one supervisor with the largest worker count on the
first WORKED of those queues; its jobs/s while it works through the backlog, as a
ratio of the same worker count's empty-queue figure (the row's ours jobs/s).

The supervisor starts with the backlog in place, so there is no enqueue commit to
count from: the run counts from the first job done until `jobs` more are done (the
done rows of the worked queues, a range that grows only by what the workers did).
The row's figure counts from the commit, its wake-up included, so the ratio leans a
little in the backlog's favour."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from ..jobs import NewJob
from ..progress import Progress
from .database import BenchDatabase
from .jobs import NOOP
from .measure import FINISH_POLL, ProcessWatch, finish_deadline, noop_batch, wait_settled
from .processes import START_TIMEOUT, BenchError, SupervisorProcess, bench_supervisor
from .scale import QUEUES, scale_queues

PRIORITIES = 5
WORKED = 5
INSERT_CHUNK = 50_000       # rows per transaction of the backlog's insert


@dataclass(frozen=True)
class BacklogPlan:
    rows: int                 # the backlog
    workers: int
    jobs: int                 # the jobs counted (at most half the worked queues' backlog)
    payload_bytes: int
    max_payload_bytes: int

    @property
    def counted(self) -> int:
        return max(1, min(self.jobs, self.rows * WORKED // QUEUES // 2))


class Backlog:
    def __init__(self, plan: BacklogPlan, db: BenchDatabase, env: Dict[str, str], tmp: Path,
                 queue: str, server: Any, progress: Progress,
                 phase: Callable[[str], None]) -> None:
        self.plan, self.db, self.env, self.tmp = plan, db, env, tmp
        self.server, self.progress, self.phase = server, progress, phase
        self.queues = scale_queues(queue)[:QUEUES]

    def run(self, empty_jobs_per_s: float) -> Dict[str, Any]:
        self.fill()
        self.phase("letting the server settle")
        settled = wait_settled(self.server, lambda: self.progress.advance(0))
        worked = self.queues[:WORKED]
        self.phase(f"backlog: {self.plan.workers} workers on {WORKED} of the queues")
        supervisor = bench_supervisor(self.plan.workers, ",".join(worked), self.env,
                                      self.tmp / "supervisor-backlog.log")
        try:
            supervisor.start()
            jobs_per_s, disk_reads = self.measure(supervisor, worked)
        finally:
            supervisor.stop()
        for queue in self.queues:
            self.db.delete_queue(queue)
        return {"rows": self.plan.rows, "queues": QUEUES, "priorities": PRIORITIES,
                "worked_queues": WORKED, "workers": self.plan.workers,
                "jobs": self.plan.counted, "jobs_per_s": jobs_per_s,
                "disk_reads_per_job": disk_reads,
                "empty_jobs_per_s": empty_jobs_per_s, "ratio": jobs_per_s / empty_jobs_per_s,
                "settled_seconds": None if settled is None else round(settled, 1)}

    def fill(self) -> None:
        """The backlog, in turn over the queues, then over the priorities."""
        self.phase(f"backlog: inserting {self.plan.rows:,} ready jobs")
        pad = noop_batch(1, self.plan.payload_bytes, self.queues[0],
                         self.plan.max_payload_bytes)[0].payload_text
        kinds = [[NewJob(NOOP, pad, queue, priority=priority) for priority in range(PRIORITIES)]
                 for queue in self.queues]
        for start in range(0, self.plan.rows, INSERT_CHUNK):
            numbers = range(start, min(self.plan.rows, start + INSERT_CHUNK))
            self.db.bare_insert([kinds[number % QUEUES][number // QUEUES % PRIORITIES]
                                 for number in numbers])
            self.progress.advance(0)

    def measure(self, supervisor: SupervisorProcess,
                worked: List[str]) -> Tuple[float, float]:
        """Jobs/s from the first job done until `counted` more are done, and the pages
        the server read from disk per job meanwhile (Innodb_buffer_pool_reads: the
        backlog may not fit the buffer pool)."""
        watch = ProcessWatch(supervisor, self.server)
        deadline = time.monotonic() + START_TIMEOUT
        while (first := self.done(worked)) == 0:
            watch()
            if time.monotonic() > deadline:
                supervisor.fail(f"no job done within {START_TIMEOUT:g}s")
            time.sleep(FINISH_POLL)
        started, done, before = time.monotonic(), first, self.db.counters()
        deadline = finish_deadline(self.plan.counted)
        while done - first < self.plan.counted:
            watch()
            if time.monotonic() > deadline:
                raise BenchError(f"{done - first} of {self.plan.counted} backlog jobs done "
                                 "at the deadline")
            time.sleep(FINISH_POLL)
            now = self.done(worked)
            self.progress.advance(min(now, first + self.plan.counted) - done)
            done = now
        seconds, after = time.monotonic() - started, self.db.counters()
        reads = after["Innodb_buffer_pool_reads"] - before["Innodb_buffer_pool_reads"]
        return (done - first) / seconds, reads / (done - first)

    def done(self, worked: List[str]) -> int:
        return sum(self.db.done(queue) for queue in worked)
