"""Running enqueued jobs inline in an application's tests, as production runs them::

    import prefork.testing

    def test_report_is_written():
        with prefork.testing.inline() as queue:        # a fresh SQLite file, migrated
            generate_report.enqueue({"account": 7})    # or queue.enqueue("report.generate", ...)
            result = queue.drain()                     # runs it, and what it enqueues
        assert result.done and not result.dead

drain() runs the real worker loop (prefork.worker.loop.Worker) on the real store, in
this process and thread, without a fork: the same claims, leases, retries and dead
letters as production. Only the backoff changes: retries wait milliseconds (the
retry_base and retry_cap settings; a handler's own backoff= is cut to retry_cap),
not seconds, so a job failing twice and then succeeding is done with 3 attempts
within one drain(). Limited job types (concurrency=, rate=) run through the
limited claim, as in production; their rate is not waited for, as the backoff is
not. What drain() does not do:
run jobs whose delay or run_at is still in the future (counted as `scheduled`),
enforce hard timeouts or crash limits (no supervisor watches the test process).

Inside inline(), enqueue_task() and the handlers' `.enqueue(...)` write to the test
queue. Code that enqueues on its own connection (prefork.enqueue(conn, ...)) must
open that connection on the same database (queue.config.dsn).

Not imported by `import prefork`: production processes never load it.
"""
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence

from .client import Client, set_default_client
from .config import Config, load
from .failures import FailedAttempt
from .jobs import Job, Lease, Outcome, Payload
from .limits.declared import declared_rules, handled_types
from .limits.rules import LimitRule
from .retry import Decision
from .store import open_store
from .store.contract import JobRow, Store
from .worker.limited import LimitedClaims
from .worker.loop import Worker

# Backoff in test mode: retry n waits min(cap, base * 2^(n-1)) seconds, as in production.
RETRY_BASE = 0.001
RETRY_CAP = 0.01
# How long drain() waits past a retry's latest due time before it leaves the job (a
# paused queue, another worker took it): the database's clock may lag ours a little.
RETRY_GRACE = 1.0
DEFAULT_MAX_JOBS = 1000


@dataclass
class Drained:
    """What one drain() ran. Ids are job ids, each listed once, in the order they ended."""
    done: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)   # ended by prefork.JobCancelled
    # The latest exception of each job that failed an attempt (retried, or dead).
    errors: dict[int, BaseException] = field(default_factory=dict)
    attempts: int = 0    # handler runs, retries included
    retries: int = 0     # failed attempts that were scheduled to run again
    scheduled: int = 0   # jobs of the drained queues left waiting for a future time


class DrainError(Exception):
    """drain() could not end as asked; `summary` holds what it ran."""

    def __init__(self, message: str, summary: Drained) -> None:
        super().__init__(message)
        self.summary = summary


class DeadJobs(DrainError):
    """Jobs went dead during drain() (raise_on_dead). Raised once the drain is over,
    from the first dead job's exception (shown as the cause, with its traceback)."""


class TooManyJobs(DrainError):
    """drain() ran max_jobs attempts and jobs were still ready: a job that enqueues
    itself, or more work than the test expected."""


class _Recorder:
    """The WorkerListener of an inline worker: what each job ran to, for Drained."""

    def __init__(self) -> None:
        self.summary = Drained()
        self.types: Counter[str] = Counter()   # attempts per job type
        self.type_of: dict[int, str] = {}
        self.running: Job | None = None
        self.retry_due = 0.0   # monotonic time by which every retry scheduled is due
        self.pending: set[int] = set()   # ids of jobs waiting for their retry

    def busy(self, job: Job) -> None:
        self.running = job
        self.types[job.type] += 1
        self.type_of[job.id] = job.type
        self.summary.attempts += 1
        self.pending.discard(job.id)

    def failed(self, job: Job, exc: BaseException) -> None:
        self.summary.errors[job.id] = exc

    def idle(self, outcome: Outcome, seconds: float) -> None:
        job, self.running = self.running, None
        assert job is not None, "idle() without busy()"
        if outcome is Outcome.DONE:
            self.summary.done.append(job.id)
        elif outcome is Outcome.DEAD:
            self.summary.dead.append(job.id)
        elif outcome is Outcome.CANCELLED:
            self.summary.cancelled.append(job.id)
        elif outcome is Outcome.RETRY:
            self.summary.retries += 1
            self.pending.add(job.id)
            self.retry_due = time.monotonic() + RETRY_CAP

    def dead_message(self) -> str:
        dead = self.summary.dead
        return f"{len(dead)} job(s) went dead in drain(): " + "; ".join(
            f"job {job_id} ({self.type_of[job_id]}): {_named(self.summary.errors.get(job_id))}"
            for job_id in dead)

    def held(self, leases: Sequence[Lease]) -> None:
        pass

    def waiting(self) -> None:
        pass

    def saved(self, lost: Sequence[int]) -> None:
        pass

    def returned(self, leases: Sequence[Lease]) -> None:
        pass


class _InlineWorker(Worker):
    """The production loop; it also hands each handler's exception to the recorder."""

    def __init__(self, store: Store, config: Config, recorder: _Recorder) -> None:
        super().__init__(_QuickRetries(store), config, listener=recorder)
        self.recorder = recorder
        # Every look makes a limited claim too (a job of a limited type enqueued on a
        # database where a supervisor published it is one); rates are not waited for.
        self.limited = LimitedClaims(self, _without_rates(declared_rules()), active=True)

    def record_handler_error(self, job: Job, exc: BaseException) -> Outcome:
        self.recorder.failed(job, exc)
        return super().record_handler_error(job, exc)


class _QuickRetries:
    """The real store, but a failure's retry waits at most RETRY_CAP: a handler's own
    backoff= (which retry_cap does not bound in production) included, so that drain()
    runs every retry. Everything else goes to the store as it is."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def fail(self, job: Job, error: str, decision: Decision,
             failure: FailedAttempt | None = None) -> bool:
        return self._store.fail(job, error, replace(decision, delay=min(decision.delay,
                                                                        RETRY_CAP)), failure)


class InlineQueue:
    """A test's queue: enqueue() on it, drain() it, get() a job's row to assert on."""

    def __init__(self, config: Config, store: Store, max_jobs: int,
                 raise_on_dead: bool) -> None:
        self.config = config
        self.store = store
        self.client = Client(config=config)
        self.max_jobs = max_jobs
        self.raise_on_dead = raise_on_dead

    def enqueue(self, job_type: str, payload: Payload = None, **options: Any) -> int:
        """Client.enqueue() on the test queue; the job's id."""
        return self.client.enqueue(job_type, payload, **options)

    def get(self, job_id: int) -> JobRow | None:
        """The job's row (status, attempts, last_error, ...), or None."""
        return self.store.get(job_id)

    def drain(self, queues: str | Sequence[str] | None = None, *, max_jobs: int | None = None,
              raise_on_dead: bool | None = None) -> Drained:
        """Run every job that is due in `queues` (default: the configured ones), the
        jobs they enqueue and the retries their failures schedule, until none is left
        to run. At most max_jobs attempts (TooManyJobs beyond); with raise_on_dead
        (the default set by inline()), DeadJobs if any job went dead."""
        if isinstance(queues, str):
            queues = [queues]
        config = self.config.replace(queues=list(queues)) if queues else self.config
        limit = self.max_jobs if max_jobs is None else max_jobs
        if not isinstance(limit, int) or limit < 1:   # the worker reads 0 as "no limit"
            raise ValueError(f"max_jobs must be a whole number of at least 1, not {limit!r}")
        recorder = _Recorder()
        worker = _InlineWorker(self.store, config, recorder)
        try:
            self._run(worker, recorder, limit)
        finally:
            worker.waker.close()
        summary = recorder.summary
        summary.scheduled = sum(int(figures["delayed"]) for figures
                                in self.store.queue_stats(config.queues).values())
        if summary.dead and (self.raise_on_dead if raise_on_dead is None else raise_on_dead):
            raise DeadJobs(recorder.dead_message(), summary) \
                from summary.errors.get(summary.dead[0])
        return summary

    def _run(self, worker: Worker, recorder: _Recorder, limit: int) -> None:
        """Run the loop until it finds nothing to claim and no retry is waiting (for
        a retry: wait until it is due, then run again)."""
        while True:
            worker.run(stop_when_empty=True, max_jobs=limit)
            if worker.processed >= limit and self._more_to_run(worker, recorder):
                busiest, runs = recorder.types.most_common(1)[0]
                raise TooManyJobs(f"drain() ran {limit} attempts and jobs are still ready "
                                  f"({busiest!r} ran {runs} times: does it enqueue itself?); "
                                  f"pass max_jobs= to allow more", recorder.summary)
            if not recorder.pending or time.monotonic() > recorder.retry_due + RETRY_GRACE:
                return
            time.sleep(max(RETRY_CAP / 4, recorder.retry_due - time.monotonic()))

    def _more_to_run(self, worker: Worker, recorder: _Recorder) -> bool:
        queues = worker.config.queues
        return bool(recorder.pending) or self.store.ready_count(queues, 1) > 0 \
            or self.store.limited_ready(queues, 1) > 0


@contextmanager
def inline(dsn_or_config: str | Config | None = None, *, migrate: bool = True,
           max_jobs: int = DEFAULT_MAX_JOBS, raise_on_dead: bool = True) -> Iterator[InlineQueue]:
    """An InlineQueue on a test database, made the default for enqueue_task() (and the
    handlers' `.enqueue(...)`) until the block ends.

    dsn_or_config: None (a new SQLite file in a temporary directory, removed at the
    end), a DSN, or a Config; settings not given come from the configuration as the
    CLI reads it. Use a test database: drain() runs every due job it finds there.
    migrate: apply the queue schema first (creating a SQLite file that is missing).
    max_jobs, raise_on_dead: drain()'s defaults.
    """
    with ExitStack() as stack:
        config = _test_config(dsn_or_config, stack)
        store = open_store(config, create=migrate)
        stack.callback(store.close)
        if migrate:
            store.migrate()
        # As a supervisor does: the jobs of limited types are enqueued as such. Without
        # their rates: claims enforce the published rules, and drain() waits for none.
        store.publish_limits(list(_without_rates(declared_rules()).values()), handled_types())
        queue = InlineQueue(config, store, max_jobs, raise_on_dead)
        stack.callback(queue.client.close)
        previous = set_default_client(queue.client)
        stack.callback(set_default_client, previous)
        yield queue


def _test_config(dsn_or_config: str | Config | None, stack: ExitStack) -> Config:
    """The configuration with the test's DSN and a backoff of milliseconds."""
    if isinstance(dsn_or_config, Config):
        config = dsn_or_config
    else:
        dsn = dsn_or_config
        if dsn is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="prefork-test-"))
            dsn = f"sqlite:///{folder}/queue.db"
        config = load().replace(dsn=dsn)
    return config.replace(retry_base=RETRY_BASE, retry_cap=RETRY_CAP)


def _without_rates(rules: dict[str, LimitRule]) -> dict[str, LimitRule]:
    """The rules with their rates dropped: drain() runs a rate-limited job at once."""
    return {job_type: replace(rule, rate=None) for job_type, rule in rules.items()}


def _named(error: BaseException | None) -> str:
    return "no exception" if error is None else f"{type(error).__name__}: {error}"
