"""prefork-queue: a pre-fork supervisor for a durable, database-backed job queue.

Application API:

    import prefork

    @prefork.handler("report.generate")
    def generate(job):
        with job.transaction() as cursor:   # effect + completion, one commit
            cursor.execute("INSERT INTO reports ...", (...))

    prefork.enqueue(conn, "report.generate", {"id": 7}, key="report-7")
    conn.commit()
    prefork.notify(conn)   # optional: wake this host's idle workers now

`conn` is the backend's own connection: PyMySQL, or sqlite3 with a sqlite:/// DSN.
The `cursor` from `job.transaction()` takes `%s` placeholders on both backends
(`%%` for a literal percent, as PyMySQL reads it), so a handler written on the
quick start's SQLite file runs unchanged on MySQL. Don't put `%s` inside a string
literal or comment: PyMySQL substitutes there.
"""
from contextlib import AbstractContextManager, closing
from datetime import datetime
from typing import Any, Protocol

from .errors import LeaseLost, PermanentError
from .jobs import Job, NewJob, Payload, new_job
from .registry import handler
from .wakeups import doorbell

__version__ = "0.1.0"
__all__ = ["handler", "enqueue", "notify", "Job", "PermanentError", "LeaseLost"]

# An application's open connection: a PyMySQL connection, or a sqlite3.Connection for
# a sqlite:/// DSN. Typed loosely because the PyMySQL side is duck-typed (a cursor()
# and, for notify(), the name of its database).
Connection = Any


class _Backend(Protocol):
    """What enqueue() and notify() need of a store module (store/*/store.py)."""

    def enqueue_on(self, cursor: Any, new_job: NewJob) -> int: ...

    def bell_key_of(self, conn: Connection) -> str: ...

    def queue_schema_named(self, conn: Connection) -> AbstractContextManager[None]: ...


def enqueue(conn: Connection, job_type: str, payload: Payload = None, *, queue: str = "default",
            key: str | None = None, delay: float = 0.0, run_at: datetime | None = None,
            priority: int = 0, max_attempts: int = 5, max_payload_bytes: int = 65536) -> int:
    """Enqueue on the application's own connection (PyMySQL or sqlite3), inside its
    open transaction; does not commit, so the caller's row and its job commit together.
    Returns the job id (the existing one for a repeated queue and key)."""
    job = new_job(job_type, payload, queue=queue, key=key, delay=delay, run_at=run_at,
                  priority=priority, max_attempts=max_attempts,
                  max_payload_bytes=max_payload_bytes)
    # A database without the queue schema raises NoQueueDatabase (a UserError naming
    # it), not the driver's "no such table": translated after the fact, no extra query.
    backend = _backend_for(conn)
    with closing(conn.cursor()) as cursor, backend.queue_schema_named(conn):
        return backend.enqueue_on(cursor, job)


def notify(conn: Connection, queue: str = "default", jobs: int = 1) -> None:
    """Call after the transaction holding your enqueue()s commits: the supervisors of
    this host wake `jobs` idle workers for `queue` at once, instead of finding the
    jobs at their next poll. Best effort; no supervisor listening is no error."""
    doorbell.ring(_backend_for(conn).bell_key_of(conn), {queue: jobs})


def _backend_for(conn: Connection) -> _Backend:
    """The store module that speaks `conn`'s dialect (its SQL stays there). Imported on
    first use: an application importing prefork loads one dialect, and a Python built
    without sqlite3 still runs MySQL."""
    import sqlite3
    if isinstance(conn, sqlite3.Connection):
        from .store.sqlite import store as sqlite_backend
        return sqlite_backend
    from .store.mysql import store as mysql_backend
    return mysql_backend
