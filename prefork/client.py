"""Producing jobs: on the application's own connection (enqueue, notify), or with a
Client that holds its own connection to the configured queue database.

    prefork.enqueue(conn, ...)         inside the application's transaction (no commit)
    prefork.cancel(conn, job_ids)      likewise: cancels with the caller's commit
    prefork.Client(dsn).enqueue(...)   opens, inserts, commits and rings by itself
    prefork.Client(dsn).cancel(ids)    opens, cancels and commits by itself
    prefork.Client(dsn).result(id)     a done job's result (waiting for it if asked)
    enqueue_task(job_type, ...)        the process's default Client (task.enqueue(...))
    result(job_id, wait=...)           the default Client's result() (prefork.result)

A Client never creates a queue database (only `run` and `migrate` do): a DSN
without the queue schema raises NoQueueDatabase naming it. No connection crosses
a fork: a Client used in a forked child opens its own.
"""
import math
import os
import sys
import threading
import time
import weakref
from contextlib import AbstractContextManager, closing, nullcontext
from datetime import datetime
from typing import Any, Callable, Iterable, TypeVar, cast

from . import connections
from .cancellation import CancelReport
from .config import Config, load
from .errors import JobFailed, JobNotFinished, UserError
from .jobs import FINISHED_STATES, JobStatus, NewJob, Payload, check_key, new_job
from .store import driver_errors, open_store
from .store.contract import Store
from .store.mysql import wakeups as mysql_wakeups
from .wakeups import doorbell, remote
from .workflows.model import Enqueued, Progress
from .workflows.plan import plan_batch, plan_flow
from .workflows.spec import Flow, JobSpec, Step, steps_of

# An application's connection (see connections.py): a DB-API connection of PyMySQL,
# mysqlclient, mysql-connector-python or sqlite3, or a SQLAlchemy Session or
# Connection on one of them. Typed loosely: none of them is imported to type it.
Connection = Any
Result = TypeVar("Result")
# A Client's connection idle longer than this is replaced before its next use: the
# server may have closed it meanwhile (MySQL's wait_timeout, a restart, a failover),
# and an enqueue on a dead connection cannot be retried safely (it may have run).
IDLE_REOPEN_SECONDS = 60.0
# result(wait=...) looks at the job this often: the first look after 50 ms, each
# next one later by half, at most every half second.
RESULT_POLL = (0.05, 1.5, 0.5)


def enqueue(conn: Connection, job_type: str, payload: Payload = None, *, queue: str = "default",
            key: str | None = None, delay: float = 0.0, run_at: datetime | None = None,
            priority: int = 0, max_attempts: int = 5, max_payload_bytes: int = 65536,
            concurrency_key: str | None = None) -> int:
    """Enqueue on the application's own connection, inside its open transaction; does
    not commit, so the caller's row and its job commit together. `conn` is a DB-API
    connection of PyMySQL, mysqlclient, mysql-connector-python or sqlite3, or a
    SQLAlchemy Session or Connection on one of them (a TypeError names them for
    anything else). concurrency_key: the job's limit group within its type (a
    handler's concurrency and rate hold per key). Returns the job id (the existing
    one for a repeated queue and key)."""
    job = new_job(job_type, payload, queue=queue, key=key, delay=delay, run_at=run_at,
                  priority=priority, max_attempts=max_attempts,
                  max_payload_bytes=max_payload_bytes, concurrency_key=concurrency_key)
    # A database without the queue schema raises NoQueueDatabase (a UserError naming
    # it), not the driver's "no such table": translated after the fact, no extra query.
    backend, dbapi = connections.in_transaction(conn, "prefork.enqueue()")
    with closing(dbapi.cursor()) as cursor, backend.queue_schema_named(dbapi):
        return backend.enqueue_on(cursor, job)


def cancel(conn: Connection, job_id_or_ids: int | Iterable[int]) -> CancelReport:
    """Cancel jobs on the application's own connection, inside its open transaction (no
    commit: they are cancelled when the caller commits). A ready or delayed job is
    cancelled at once and never runs; a running one is stopped by the supervisor
    that runs it (its handler gets prefork.JobCancelled) once this commits; a
    finished one keeps its result. The report names each id's fate."""
    job_ids = job_id_list(job_id_or_ids)
    backend, dbapi = connections.in_transaction(conn, "prefork.cancel()")
    if not job_ids:
        return CancelReport([], [], [], [])
    with closing(dbapi.cursor()) as cursor, backend.queue_schema_named(dbapi):
        return backend.cancel_on(cursor, job_ids)


def job_id_list(job_id_or_ids: int | Iterable[int]) -> list[int]:
    """One id or many as a list without repeats, in order; a one-line UserError for
    anything but whole numbers."""
    given: list[object] = [job_id_or_ids]
    if isinstance(job_id_or_ids, Iterable) and not isinstance(job_id_or_ids, (str, bytes)):
        given = list(job_id_or_ids)
    for job_id in given:
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise UserError(f"a job id is a whole number, not {job_id!r}")
    return list(dict.fromkeys(cast(list[int], given)))


def notify(conn: Connection, queue: str = "default", jobs: int = 1) -> None:
    """Call after the transaction holding your enqueue()s commits: the supervisors of
    this host wake `jobs` idle workers for `queue` at once, and those of other hosts
    that listen for wake-ups (wakeup_bind) look for the jobs at once, instead of
    finding them at their next poll. Best effort; no supervisor listening is no
    error. Their addresses are read on `conn` at most every few seconds, and only
    when that leaves it as it was (outside a transaction)."""
    with connections.outside_transaction(conn, "prefork.notify()") as (backend, dbapi):
        key = backend.bell_key_of(dbapi)
        peers = remote.peers(key, lambda: _peers_of(dbapi))
    doorbell.ring(key, {queue: jobs})
    remote.ring(peers, {queue: jobs})


def _peers_of(dbapi: Any) -> remote.PeerRows | None:
    """The registry's listening supervisors, read on an application's connection."""
    sqlite3 = sys.modules.get("sqlite3")   # as connections.py: not imported for MySQL
    if sqlite3 is not None and isinstance(dbapi, sqlite3.Connection):
        from .store.sqlite import wakeups as sqlite_wakeups
        return sqlite_wakeups.peers_of(dbapi)
    return mysql_wakeups.peers_of(dbapi)


class Client:
    """A producer with its own connection to the queue database: each enqueue
    inserts, commits and rings this host's idle workers awake.

        with prefork.Client() as client:          # the configured DSN
            client.enqueue("report.generate", {"account": 7}, key="report-7")

    The DSN is `dsn` when given, else the configuration's, read as the CLI reads it
    (PREFORK_QUEUE_CONFIG, then PREFORK_QUEUE_* variables, then defaults); `config`
    replaces that reading. The connection opens at the first enqueue, never creates
    a database (NoQueueDatabase names a DSN without the queue schema), and is dropped
    after a database error, so that the next call opens a fresh one; so is one left
    idle for over a minute, which the server may have closed.

    Thread-safe: calls from several threads take turns on the one connection (an
    enqueue is one short statement); for parallel inserts use a Client per thread.
    Fork-safe: in a forked child the parent's connection is left to the parent and
    the child's first call opens its own.
    """

    def __init__(self, dsn: str | None = None, *, config: Config | None = None) -> None:
        config = config if config is not None else load()
        self.config = config.replace(dsn=dsn) if dsn else config
        self._lock = threading.Lock()
        self._store: Store | None = None
        # How its backend names a database without the queue schema (NoQueueDatabase):
        # looked up when the connection opens, not at every call.
        self._schema_named: Callable[[Any], AbstractContextManager[Any]] = nullcontext
        self._last_used = 0.0   # time.monotonic() of the last call on the connection
        _LIVE_CLIENTS.add(self)

    def enqueue(self, job_type: str, payload: Payload = None, *, queue: str = "default",
                key: str | None = None, delay: float = 0.0, run_at: datetime | None = None,
                priority: int = 0, max_attempts: int | None = None,
                concurrency_key: str | None = None) -> int:
        """Enqueue one job and commit; its id (the existing job's for a repeated queue
        and key). max_attempts defaults to the configured one; concurrency_key as
        prefork.enqueue's. Bad arguments raise a one-line UserError before anything
        is sent."""
        job = self._new_job(job_type, payload, queue=queue, key=key, delay=delay,
                            run_at=run_at, priority=priority, max_attempts=max_attempts,
                            concurrency_key=concurrency_key)
        return self._with_store(lambda store: store.enqueue(job))

    def enqueue_many(self, job_type: str, payloads: Iterable[Payload], *,
                     queue: str = "default", delay: float = 0.0, run_at: datetime | None = None,
                     priority: int = 0, max_attempts: int | None = None,
                     concurrency_key: str | None = None) -> int:
        """Enqueue a job of `job_type` for each payload, in one transaction (all are
        validated first: a bad one inserts none). Returns how many were inserted."""
        jobs = [self._new_job(job_type, payload, queue=queue, key=None, delay=delay,
                              run_at=run_at, priority=priority, max_attempts=max_attempts,
                              concurrency_key=concurrency_key)
                for payload in payloads]
        return self._with_store(lambda store: store.enqueue_many(jobs))

    def cancel(self, job_id_or_ids: int | Iterable[int]) -> CancelReport:
        """Cancel these jobs and commit (see prefork.cancel()); the report names each
        id's fate. Running jobs are stopped by their supervisors after this returns."""
        job_ids = job_id_list(job_id_or_ids)
        if not job_ids:
            return CancelReport([], [], [], [])
        return self._with_store(lambda store: store.cancel(job_ids))

    def enqueue_workflow(self, flow: Flow, *, key: str | None = None) -> Enqueued:
        """Enqueue a chain or a group and commit (see prefork.enqueue_workflow()): the
        workflow's id and its jobs' ids, in the order they were listed."""
        plan = plan_flow(flow)
        if key is not None:
            check_key(key, "workflow key")
        return self._with_store(lambda store: store.enqueue_workflow(plan, key))

    def open_batch(self, *, on_success: JobSpec | None = None,
                   on_complete: JobSpec | None = None, key: str | None = None) -> int:
        """Open a batch and commit (see prefork.open_batch()): its id."""
        plan = plan_batch(on_success, on_complete)
        if key is not None:
            check_key(key, "workflow key")
        return self._with_store(lambda store: store.enqueue_workflow(plan, key)).id

    def add_to_batch(self, batch_id: int, *steps: Step) -> list[int]:
        """Add members to an open batch and commit: their jobs' ids."""
        listed = steps_of(steps, "a batch's member")
        return self._with_store(lambda store: store.add_to_batch(batch_id, listed))

    def close_batch(self, batch_id: int) -> None:
        """Close a batch and commit: its callbacks start once every member ended."""
        self._with_store(lambda store: store.close_batch(batch_id))

    def workflow_progress(self, workflow_id: int) -> Progress:
        """A workflow's (or batch's) progress; UserError if there is none."""
        progress = self._with_store(lambda store: store.workflow_progress(workflow_id))
        if progress is None:
            raise UserError(f"no workflow {workflow_id}")
        return progress

    def result(self, job_id: int, wait: float = 0.0) -> Any:
        """The result of a done job: what its handler returned (JSON: dicts, lists,
        strings, numbers, booleans), or None when it returned None or its result
        expired (result_ttl after it was done). With `wait` (seconds), waits that long
        at most for the job to finish, looking at it every half second at most.

        Raises JobNotFinished when it has not finished (in time), JobFailed when it
        ended dead or cancelled, and UserError when there is no such job."""
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise UserError(f"a job id is a whole number, not {job_id!r}")
        if not isinstance(wait, (int, float)) or not 0 <= wait < math.inf:
            raise UserError(f"wait must be a number of seconds of at least 0, not {wait!r}")
        deadline, pause = time.monotonic() + wait, RESULT_POLL[0]
        while True:
            finished = self._with_store(lambda store: _finished_result(store, job_id))
            if finished is not None:
                return finished[0]
            if time.monotonic() + pause > deadline:
                raise JobNotFinished(f"job {job_id} has not finished"
                                     + (f" within {wait:g}s" if wait else ""))
            time.sleep(pause)
            pause = min(pause * RESULT_POLL[1], RESULT_POLL[2])

    def close(self) -> None:
        """Close the connection; a later enqueue opens a new one."""
        with self._lock:
            store, self._store = self._store, None
            if store is not None:
                store.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _new_job(self, job_type: str, payload: Payload, *, max_attempts: int | None,
                 **options: Any) -> NewJob:
        return new_job(job_type, payload, max_payload_bytes=self.config.max_payload_bytes,
                       max_attempts=self.config.max_attempts if max_attempts is None
                       else max_attempts, **options)

    def _with_store(self, action: Callable[[Store], Result]) -> Result:
        """action(store) on our connection, opened now if need be; a database error
        drops the connection (it may be broken) before it propagates."""
        with self._lock:
            if self._store is not None and \
                    time.monotonic() - self._last_used > IDLE_REOPEN_SECONDS:
                self._store.close()
                self._store = None
            if self._store is None:
                self._store = open_store(self.config)
                self._schema_named = connections.backend_for(
                    cast(Any, self._store).conn)[0].queue_schema_named
            store = self._store
            conn = cast(Any, store).conn   # the driver's: its errors name the database
            try:
                with self._schema_named(conn):
                    return action(store)
            except driver_errors():
                self._store = None
                store.close()
                raise
            finally:
                self._last_used = time.monotonic()

    def _forked(self) -> None:
        """In a new child: the connection (and a lock another thread may have held at
        the fork) belong to the parent."""
        self._lock = threading.Lock()
        if self._store is not None:
            self._store.abandon()
            self._store = None


def _finished_result(store: Store, job_id: int) -> tuple[Any] | None:
    """(its result,) of a done job; None while it has not finished."""
    job = store.get(job_id)
    if job is None:
        raise UserError(f"no job {job_id}")
    status = JobStatus(job["status"])
    if status not in FINISHED_STATES:
        return None
    if status is not JobStatus.DONE:
        raise JobFailed(f"job {job_id} is {status}: {job['last_error'] or 'no error recorded'}")
    kept = store.job_result(job_id)
    return (None if kept is None else kept.value,)


# Every Client alive in this process, for the fork hook below.
_LIVE_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()
_default: Client | None = None
_default_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for client in list(_LIVE_CLIENTS):
        client._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def default_client() -> Client:
    """The process's default Client, on the configured DSN, made at first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def set_default_client(client: Client | None) -> Client | None:
    """Make `client` the one enqueue_task() uses (None: the configured one again, made at
    next use); returns the one it replaces. prefork.testing.inline() uses this."""
    global _default
    with _default_lock:
        previous, _default = _default, client
        return previous


def enqueue_task(job_type: str, payload: Payload = None, **options: Any) -> int:
    """Enqueue with the default Client (what a handler's `.enqueue(...)` calls): opens,
    inserts, commits and rings by itself. Options as Client.enqueue()'s."""
    return default_client().enqueue(job_type, payload, **options)


def result(job_id: int, wait: float = 0.0) -> Any:
    """prefork.result(): Client.result() of the default Client (the configured DSN)."""
    return default_client().result(job_id, wait)
