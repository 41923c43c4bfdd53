"""The workflow scenarios of `prefork-queue bench --workflows`: one supervisor with
the largest worker count runs the app prefork/bench/workflow_jobs.py on the
scratch queue and a queue for callbacks, and

- group: `groups` rounds of `group_size` plain no-op jobs (enqueue_many, one
  transaction), then a group of as many no-op members and a callback
  (prefork.group(members, then=...), one transaction). Both are counted from the
  enqueue's commit until none of the jobs is left unfinished (the callback waits in
  its own queue, so it is not among them): the members' jobs/s as a ratio of the
  plain jobs', over all rounds. Then the callback's start delay: from its last
  member's finished_at (the database's clock, set in the transaction that ended it
  and released the callback) to the callback handler's first line (time.time()):
  one host, one clock. Its p50 over the rounds.
- chain: a chain of `chain_steps` bench.mark steps, steps/s from the enqueue's
  commit to the last step's end, and each step's start delay after the step
  before it was written done (p50, p99).

The workflows' keys start with the scratch queue's name, so the bench deletes
them (and the workflows nested in them) afterwards, with the queues' jobs.
"""
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List

import prefork

from ..jobs import NewJob
from ..progress import Progress
from ..workflows.plan import plan_flow
from ..workflows.spec import JobSpec
from .database import BenchDatabase
from .jobs import MARK, MARKS_FILE_ENV, WORKFLOWS_APP
from .measure import (FINISH_POLL, ProcessWatch, finish_deadline, noop_batch, percentile,
                      wait_finished)
from .processes import BenchError, bench_supervisor


def callback_queue(queue: str) -> str:
    """The queue of the group's callbacks, beside the scratch queue."""
    return f"{queue}-callback"


@dataclass(frozen=True)
class WorkflowPlan:
    workers: int
    group_size: int
    groups: int               # rounds of plain jobs and a group
    chain_steps: int
    payload_bytes: int
    max_payload_bytes: int

    @property
    def total_jobs(self) -> int:
        return self.groups * (2 * self.group_size + 1) + self.chain_steps


@dataclass(frozen=True)
class Run:
    """Jobs run from an enqueue's commit until none was left unfinished."""
    jobs: int
    enqueue_seconds: float
    seconds: float
    statements: float | None   # the server's, less the bench's own (None on SQLite)


class WorkflowScenarios:
    def __init__(self, plan: WorkflowPlan, db: BenchDatabase, env: Dict[str, str], tmp: Path,
                 queue: str, server: Any, progress: Progress,
                 phase: Callable[[str], None]) -> None:
        self.plan, self.db, self.queue, self.server = plan, db, queue, server
        self.progress, self.phase = progress, phase
        self.callbacks = callback_queue(queue)
        self.marks_file = tmp / "marks"
        self.log_path = tmp / "supervisor-workflows.log"
        self.env = {**env, MARKS_FILE_ENV: str(self.marks_file)}

    def run(self) -> Dict[str, Any]:
        """{"group": figures, "chain": figures}."""
        supervisor = bench_supervisor(self.plan.workers, f"{self.queue},{self.callbacks}",
                                      self.env, self.log_path, app=WORKFLOWS_APP)
        try:
            supervisor.start()
            supervisor.wait_idle(self.plan.workers)
            watch = ProcessWatch(supervisor, self.server)
            group = self.group_rounds(watch)
            chain = self.chain_run(watch)
        finally:
            supervisor.stop()
        return {"group": group, "chain": chain}

    # -- the group ----------------------------------------------------------------------------

    def group_rounds(self, watch: ProcessWatch) -> Dict[str, Any]:
        plain: List[Run] = []
        members: List[Run] = []
        delays: List[float] = []
        for number in range(self.plan.groups):
            self.phase(f"workflows: {self.plan.group_size:,} plain jobs ({number + 1} of "
                       f"{self.plan.groups})")
            plain.append(self.plain_run(watch))
            self.phase(f"workflows: a group of {self.plan.group_size:,} ({number + 1} of "
                       f"{self.plan.groups})")
            run, delay = self.group_run(watch, number)
            members.append(run)
            delays.append(delay)
        ours, reference = _rate(members), _rate(plain)
        return {"workers": self.plan.workers, "members": self.plan.group_size,
                "groups": self.plan.groups, "jobs_per_s": ours, "plain_jobs_per_s": reference,
                "ratio": ours / reference, "enqueue_per_s": _enqueue_rate(members),
                "plain_enqueue_per_s": _enqueue_rate(plain),
                "callback_delay_p50_ms": percentile(delays, 50) * 1000,
                "callback_delays_ms": [delay * 1000 for delay in delays],
                "stmts_per_job": _per_job(members), "plain_stmts_per_job": _per_job(plain)}

    def noop_jobs(self) -> List[NewJob]:
        return noop_batch(self.plan.group_size, self.plan.payload_bytes, self.queue,
                          self.plan.max_payload_bytes)

    def plain_run(self, watch: ProcessWatch) -> Run:
        batch = self.noop_jobs()
        run = self.timed(lambda: self.db.enqueue_many(batch), self.queue, len(batch), watch)
        self.check_done(self.queue, len(batch))
        self.db.delete_queue(self.queue)
        return run

    def group_run(self, watch: ProcessWatch, number: int) -> tuple[Run, float]:
        """The members' run, and the callback's start delay (seconds) after the last
        member was written done."""
        flow = prefork.group([JobSpec(job) for job in self.noop_jobs()],
                             then=prefork.job(MARK, {}, queue=self.callbacks))
        plan, key = plan_flow(flow), f"{self.queue}:group-{number}"
        enqueued = []
        run = self.timed(lambda: enqueued.append(self.db.store.enqueue_workflow(plan, key)),
                         self.queue, self.plan.group_size, watch)
        self.wait(self.callbacks, 1, watch)
        last_member = max(self.check_done(self.queue, self.plan.group_size).values())
        callback = enqueued[0].job_ids[-1]
        started = self.marks()[callback]
        self.clean_up()
        return run, started - last_member

    # -- the chain ----------------------------------------------------------------------------

    def chain_run(self, watch: ProcessWatch) -> Dict[str, Any]:
        steps = self.plan.chain_steps
        self.phase(f"workflows: a chain of {steps:,} steps")
        flow = prefork.chain(*[prefork.job(MARK, {}, queue=self.queue)] * steps)
        plan, enqueued = plan_flow(flow), []
        run = self.timed(lambda: enqueued.append(self.db.store.enqueue_workflow(
            plan, f"{self.queue}:chain")), self.queue, steps, watch)
        done = self.check_done(self.queue, steps)
        started, order = self.marks(), enqueued[0].job_ids
        delays = [started[step] - done[before] for before, step in zip(order, order[1:])]
        self.clean_up()
        return {"workers": self.plan.workers, "steps": steps,
                "steps_per_s": steps / run.seconds,
                "step_delay_p50_ms": percentile(delays, 50) * 1000 if delays else None,
                "step_delay_p99_ms": percentile(delays, 99) * 1000 if delays else None,
                "stmts_per_step": None if run.statements is None else run.statements / steps}

    # -- the parts ----------------------------------------------------------------------------

    def timed(self, enqueue: Callable[[], Any], queue: str, jobs: int,
              watch: ProcessWatch) -> Run:
        """Enqueue (one transaction), then wait until none of `jobs` in `queue` is left
        unfinished."""
        before = self.db.counters()
        started = time.monotonic()
        enqueue()
        committed = time.monotonic()
        self.wait(queue, jobs, watch)
        finished = time.monotonic()
        after = self.db.counters()
        return Run(jobs, committed - started, finished - committed,
                   None if before is None else after["Questions"] - before["Questions"])

    def wait(self, queue: str, jobs: int, watch: ProcessWatch) -> None:
        wait_finished(self.db, queue, jobs, watch, self.progress, FINISH_POLL,
                      finish_deadline(jobs), lambda: self.db.flow_unfinished(queue))

    def check_done(self, queue: str, jobs: int) -> Dict[int, float]:
        """The done jobs of `queue` and when each was written done: all `jobs` of them."""
        done = self.db.finished_at(queue)
        if len(done) != jobs:
            raise BenchError(f"{jobs} jobs of a workflow scenario ran but {len(done)} are done")
        return done

    def marks(self) -> Dict[int, float]:
        """{job id: when its bench.mark handler started} written so far."""
        try:
            text = self.marks_file.read_text(encoding="ascii")
        except FileNotFoundError:
            return {}
        return {int(job_id): float(moment) for job_id, moment
                in (line.split() for line in text.splitlines() if line.strip())}

    def clean_up(self) -> None:
        """The rows of a finished scenario: its jobs, its workflows, its marks."""
        for queue in (self.queue, self.callbacks):
            self.db.delete_queue(queue)
        self.db.delete_workflows(f"{self.queue}:")
        if self.marks_file.exists():
            os.truncate(self.marks_file, 0)


def _rate(runs: List[Run]) -> float:
    return sum(run.jobs for run in runs) / sum(run.seconds for run in runs)


def _enqueue_rate(runs: List[Run]) -> float:
    return sum(run.jobs for run in runs) / sum(run.enqueue_seconds for run in runs)


def _per_job(runs: List[Run]) -> float | None:
    counted = [run.statements for run in runs]
    if any(count is None for count in counted):
        return None
    return sum(count for count in counted if count is not None) / sum(run.jobs for run in runs)
