"""What one bench run measures, with whatever processes are working the queue:
throughput end to end, pickup latency with idle workers, and the idle load."""
import os
import random
import time
from dataclasses import dataclass
from typing import Optional

from ..jobs import new_job
from .jobs import NOOP, PICKUP
from .processes import BenchError, cpu_seconds

FINISH_POLL = 0.05          # seconds between counts while a batch runs
PICKUP_POLL = 0.005         # while one pickup job is out
PICKUP_TIMEOUT = 30.0
IDLE_SETTLE = 2.0           # let idle workers reach their longest poll interval
IDLE_WINDOW = 3.0
BACKGROUND_WINDOW = 2.0
SETTLE_LIMIT = 180.0        # seconds at most to wait for the server after a bulk load
SETTLED_CPU_SHARE = 0.05    # of one core: the server is quiet
MEMORY_SAMPLE_INTERVAL = 1.0


class ProcessWatch:
    """Called at every poll of a run: fails fast when a process working the queue
    died, and keeps the peak memory figures, sampled about once a second."""

    def __init__(self, processes, server=None):
        self.processes = processes    # a SupervisorProcess or a BaselinePool
        self.server = server          # the database server's psutil.Process, when local
        self.peaks = {}
        self.next_sample = 0.0

    def __call__(self):
        self.processes.check_alive()
        if time.monotonic() >= self.next_sample:
            self.next_sample = time.monotonic() + MEMORY_SAMPLE_INTERVAL
            for name, value in self.processes.memory().items():
                if value is not None:
                    self.peaks[name] = max(value, self.peaks.get(name, 0.0))

    def cpu_seconds(self):
        """{"parent", "children"[, "server"]}: CPU seconds used so far."""
        seconds = self.processes.cpu_seconds()
        if self.server is not None:
            if self.server.is_running():
                seconds["server"] = cpu_seconds([self.server.pid])
            else:
                self.server = None
        return seconds


def noop_batch(count, payload_bytes, queue, max_payload_bytes, job_type=NOOP, keys=(None,)):
    """`count` no-op jobs whose JSON payload is `payload_bytes` long ({"pad":"xx..."}),
    their concurrency keys taken from `keys` in turn (so claim order alternates them)."""
    pad = "x" * max(0, payload_bytes - len('{"pad":""}'))
    jobs = [new_job(job_type, {"pad": pad}, queue=queue, max_payload_bytes=max_payload_bytes,
                    concurrency_key=key) for key in keys]
    return [jobs[n % len(jobs)] for n in range(count)]


@dataclass
class Throughput:
    jobs: int
    enqueue_per_s: float
    jobs_per_s: float
    counters: Optional[dict]     # server counter deltas less the bench's own; None on SQLite
    cpu_ms_per_job: dict         # {"parent", "children"[, "server"]}: ms per job
    committed_at: float = 0.0    # wall clock (time.time()) once the enqueue committed

    def per_job(self, name):
        if self.counters is None:
            return None
        return self.counters[name] / self.jobs


def measure_pool(db, queue, batch, pool, server, progress):
    """measure_throughput of `batch` worked by `pool` (a BaselinePool), which is
    started here, released (if gated) once the batch is committed, and stopped
    whatever happens."""
    try:
        pool.start()
        pool.wait_ready()
        return measure_throughput(db, queue, batch, ProcessWatch(pool, server), progress,
                                  on_committed=pool.release)
    finally:
        pool.stop()


def finish_deadline(jobs, expected_seconds=0.0):
    """Generous: a run slower than 20 jobs/s plus a minute (past the seconds a rate
    limit makes it take) is broken, not slow."""
    return time.monotonic() + expected_seconds + 60.0 + jobs / 20.0


def measure_throughput(db, queue, batch, watch, progress, expected_seconds=0.0,
                       unfinished=None, on_committed=None):
    """Enqueue `batch` in one transaction, then count until none of it is unfinished.
    watch() runs at every count (it checks the processes, samples memory);
    watch.cpu_seconds() is the CPU time of the processes working the queue.
    expected_seconds: how long a rate limit makes the batch take, at least.
    unfinished: how the count is taken (default: db.unfinished(queue)).
    on_committed: called once the batch is committed, in the time measured."""
    before, cpu_before = db.counters(), watch.cpu_seconds()
    started = time.monotonic()
    db.enqueue_many(batch)
    committed, committed_at = time.monotonic(), time.time()
    if on_committed is not None:
        on_committed()
    wait_finished(db, queue, len(batch), watch, progress, FINISH_POLL,
                  finish_deadline(len(batch), expected_seconds), unfinished)
    finished = time.monotonic()
    cpu = _deltas(cpu_before, watch.cpu_seconds())   # "server" only when both had it
    return Throughput(jobs=len(batch), enqueue_per_s=len(batch) / (committed - started),
                      jobs_per_s=len(batch) / (finished - committed),
                      counters=_deltas(before, db.counters()),
                      cpu_ms_per_job={name: 1000 * seconds / len(batch)
                                      for name, seconds in cpu.items()},
                      committed_at=committed_at)


def wait_finished(db, queue, total, watch, progress, interval, deadline, count=None):
    count = count or (lambda: db.unfinished(queue))
    done = 0
    while True:
        unfinished = count()
        progress.advance(total - unfinished - done)
        done = total - unfinished
        if not unfinished:
            return
        watch()
        if time.monotonic() > deadline:
            raise BenchError(f"{unfinished} of {total} jobs still unfinished at the deadline")
        time.sleep(interval)


def _deltas(before, after):
    if before is None:
        return None
    return {name: after[name] - before[name] for name in before if name in after}


@dataclass(frozen=True)
class PickupPlan:
    """`count` pickup jobs, one at a time, each enqueued a random `gap` (seconds, a
    range) after the previous one finished; `ring`: enqueue through the store, which
    rings this host's supervisors, or as an application does (prefork.enqueue on
    its own connection), which does not: then only the supervisor's poll finds it."""
    count: int
    gap: tuple
    ring: bool
    latency_file: str


def measure_pickups(db, queue, plan, watch, progress):
    """Returns the latencies (ms) the pickup handler wrote, enqueue to handler start."""
    enqueue = db.enqueue if plan.ring else db.enqueue_unrung
    for _ in range(plan.count):
        time.sleep(random.uniform(*plan.gap))
        enqueue(new_job(PICKUP, {"enqueued_at": time.time()}, queue=queue))
        wait_finished(db, queue, 1, watch, progress, PICKUP_POLL,
                      time.monotonic() + PICKUP_TIMEOUT)
    latencies = read_numbers(plan.latency_file)
    if len(latencies) != plan.count:
        raise BenchError(f"{plan.count} pickup jobs ran but {len(latencies)} latencies "
                         "were written")
    os.truncate(plan.latency_file, 0)
    return latencies


def read_numbers(path):
    """The numbers a handler wrote to `path`, one a line (none when it wrote none)."""
    try:
        with open(path, encoding="ascii") as handle:
            return [float(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def measure_idle_load(db, watch):
    """Statements per second the rest of the server sends while the queue is empty
    (server-wide, so other clients of the server count too). None on SQLite."""
    if not db.is_mysql:
        return None
    _sleep_watching(IDLE_SETTLE, watch)
    return statements_per_second(db, IDLE_WINDOW, watch)


def measure_idle_rates(db, watch):
    """With the queue empty (after IDLE_SETTLE): per second, the statements and the
    index entries read in order (Handler_read_next) of the rest of the server, and
    the server's CPU ms (None when not on this host). None on SQLite."""
    if not db.is_mysql:
        return None
    _sleep_watching(IDLE_SETTLE, watch)
    before, cpu_before, started = db.counters(), watch.cpu_seconds(), time.monotonic()
    _sleep_watching(IDLE_WINDOW, watch)
    after, cpu_after = db.counters(), watch.cpu_seconds()
    seconds = time.monotonic() - started
    server = ("server" in cpu_before and "server" in cpu_after)
    return {"stmts_per_s": (after["Questions"] - before["Questions"]) / seconds,
            "rows_read_per_s": (after["Handler_read_next"] - before["Handler_read_next"])
            / seconds,
            "server_cpu_ms_per_s": 1000 * (cpu_after["server"] - cpu_before["server"]) / seconds
            if server else None}


def wait_settled(server, watch):
    """After a bulk load the server goes on flushing pages and purging for a while,
    which a table in steady use does not: wait, up to SETTLE_LIMIT, until its CPU is
    quiet. Returns the seconds waited; None when the server is not on this host."""
    if server is None:
        return None
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_LIMIT:
        before, since = sum(server.cpu_times()[:2]), time.monotonic()
        _sleep_watching(1.0, watch)
        share = (sum(server.cpu_times()[:2]) - before) / (time.monotonic() - since)
        if share < SETTLED_CPU_SHARE:
            break
    return time.monotonic() - started


def measure_background(db):
    """Statements per second of the server's other clients, before a run starts."""
    return statements_per_second(db, BACKGROUND_WINDOW, lambda: None) if db.is_mysql else None


def statements_per_second(db, seconds, watch):
    before, started = db.counters(), time.monotonic()
    _sleep_watching(seconds, watch)
    after, ended = db.counters(), time.monotonic()
    return (after["Questions"] - before["Questions"]) / (ended - started)


def _sleep_watching(seconds, watch):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        watch()
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def percentile(values, pct):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]
