"""The plain in-memory model of the store contract that tests/store_model.py checks
the real store against after every step, and the test's own view of the database
(its statements run through the store's own connection).

The model knows each job's state, attempts, crashes and lease token, and which
ready jobs are due; the order of ready jobs (priority, available_at, id) uses
the available_at values the store wrote, which check_row() reads back.
"""
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from prefork.jobs import JobStatus
from prefork.store.sqlite.file import stamp
from prefork.store.sqlite.store import SQLiteStore

READY, RESERVED, DONE, DEAD = JobStatus.READY, JobStatus.RESERVED, JobStatus.DONE, JobStatus.DEAD
CANCELLED = JobStatus.CANCELLED
PAST = datetime(2000, 1, 1)     # "long ago": expired leases, come-due jobs, silent supervisors
# Times the store wrote are "now or before" (due, expired) or at least hours ahead
# (delayed, live): compared with this host's clock give or take this much, so that
# a database server whose clock is a little off this host's cannot fail the check.
SKEW = timedelta(hours=1)

# The test's own statements, run through the store's connection (%s; ? on SQLite).
CLEAR = ("DELETE FROM prefork_jobs", "DELETE FROM prefork_processes",
         "DELETE FROM prefork_queue_states", "DELETE FROM prefork_restarts",
         "DELETE FROM prefork_workflows")
ROWS = ("SELECT id, queue, idempotency_key, status, priority, attempts, max_attempts, crashes,"
        " lease_token, available_at, lease_until, locked_by, process_id,"
        " cancel_requested_at IS NOT NULL FROM prefork_jobs")
NEW_ROWS = ("SELECT id, queue, idempotency_key, available_at FROM prefork_jobs WHERE id > %s"
            " ORDER BY id")
EXPIRE_LEASE = "UPDATE prefork_jobs SET lease_until = %s WHERE id = %s AND status = 'reserved'"
COME_DUE = "UPDATE prefork_jobs SET available_at = %s WHERE id = %s AND status = 'ready'"
GO_SILENT = "UPDATE prefork_processes SET heartbeat_at = %s WHERE id = %s AND state = 'running'"


def raw(store, sql, args=()):
    """Run a test statement through the store's own connection: (rows, row count).
    A datetime argument is written as the backend stores times."""
    if isinstance(store, SQLiteStore):
        values = [stamp(value) if isinstance(value, datetime) else value for value in args]
        cursor = store.conn.execute(sql.replace("%s", "?"), values)
        return cursor.fetchall(), cursor.rowcount
    with store.conn.cursor() as cursor:
        count = cursor.execute(sql, args)
        return list(cursor.fetchall()), count


def as_time(value):
    """A time column as a naive UTC datetime (SQLite stores text)."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def utc_now():
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass
class ModelJob:
    id: int
    queue: str
    key: str | None
    type: str
    payload: str
    priority: int
    max_attempts: int
    due: bool
    status: JobStatus = READY
    attempts: int = 0
    crashes: int = 0
    token: str | None = None     # reserved, and kept on a done row
    live: bool = False           # the lease has not expired
    worker: str | None = None
    process_id: int | None = None
    available_at: datetime | None = None   # as the store wrote them (read after each step)
    lease_until: datetime | None = None
    cancelling: bool = False     # reserved, its cancellation pending


@dataclass
class Model:
    """What the contract says the queue holds; the store must agree after every step."""
    jobs: dict = field(default_factory=dict)          # id -> ModelJob
    keys: dict = field(default_factory=dict)          # (queue, key) -> id
    paused: set = field(default_factory=set)
    supervisors: dict = field(default_factory=dict)   # id -> "running" | "stopped" | "pruned"
    silent_since: dict = field(default_factory=dict)  # running id -> its moved heartbeat
    tokens: set = field(default_factory=set)          # every token a claim ever handed out
    max_id: int = 0
    ticks: int = 0

    def past(self):
        """A distinct moment long ago (so "oldest first" has one right answer)."""
        self.ticks += 1
        return PAST + timedelta(seconds=self.ticks)

    def add(self, job_id, spec):
        due = spec.run_at <= utc_now() if spec.run_at else spec.delay == 0
        self.jobs[job_id] = ModelJob(job_id, spec.queue, spec.key, spec.type, spec.payload_text,
                                     spec.priority, spec.max_attempts, due)
        if spec.key is not None:
            self.keys[(spec.queue, spec.key)] = job_id
        self.max_id = max(self.max_id, job_id)

    def claimable(self, queue):
        if queue in self.paused:
            return []
        ready = [job for job in self.jobs.values()
                 if job.queue == queue and job.status == READY and job.due]
        return sorted(ready, key=lambda job: (job.priority, job.available_at, job.id))

    def claim_order(self, queues, limit):
        """The ids a claim reserves: up to `limit`, queue after queue, in claim order."""
        ids = []
        for queue in queues:
            ids += [job.id for job in self.claimable(queue)[:limit - len(ids)]]
        return ids

    def first_queue_order(self, queues, limit):
        """A claim that stops at the first queue with ready jobs (also "up to limit")."""
        first = self.claimable(queues[0])[:limit]
        return [job.id for job in first] if first else self.claim_order(queues[1:], limit)

    def holder(self, lease):
        """The job this lease still holds (reserved, same token; live or not), or None."""
        job = self.jobs.get(lease.job_id)
        return job if job is not None and job.status == RESERVED and job.token == lease.token \
            else None

    def holds_live(self, lease):
        job = self.holder(lease)
        return job is not None and job.live

    def done_under(self, lease):
        job = self.jobs.get(lease.job_id)
        return job is not None and job.status == DONE and job.token == lease.token

    def reserve(self, job_id, token, worker, process_id):
        job = self.jobs[job_id]
        job.status, job.token, job.live = RESERVED, token, True
        job.attempts += 1
        job.worker, job.process_id = worker, process_id
        self.tokens.add(token)

    def complete(self, job_id):
        job = self.jobs[job_id]
        job.status, job.cancelling = DONE, False   # the token stays on a done row

    def settle(self, job_id, status, due=True, attempts_delta=0, crashes_delta=0):
        """A job leaves its lease: ready (due or delayed) or dead, its token gone;
        cancelled instead when its cancellation is pending."""
        job = self.jobs[job_id]
        status = CANCELLED if job.cancelling else status
        job.status, job.due, job.token, job.live, job.cancelling = status, due, None, False, False
        job.attempts += attempts_delta
        job.crashes += crashes_delta

    def cancel(self, job_ids):
        """What cancel() reports and does: (cancelled, stopping, finished, missing)."""
        report = ([], [], [], [])
        for job_id in dict.fromkeys(job_ids):
            job = self.jobs.get(job_id)
            if job is None:
                report[3].append(job_id)
            elif job.status in (READY, JobStatus.WAITING):
                self.settle(job_id, CANCELLED)
                report[0].append(job_id)
            elif job.status == RESERVED:
                job.cancelling = True
                report[1].append(job_id)
            else:
                report[2].append(job_id)
        return report

    def stopping(self, process_id):
        """The running jobs of a supervisor whose cancellation is pending."""
        return {job.id for job in self.jobs.values()
                if job.cancelling and job.process_id == process_id}

    def give_back(self, job_id):
        """What expiry and pruning do with a job whose holder is gone."""
        job = self.jobs[job_id]
        self.settle(job_id, DEAD if job.attempts >= job.max_attempts else READY)

    def revive(self, job_id, max_attempts=None):
        job = self.jobs[job_id]
        self.settle(job_id, READY)
        job.attempts = job.crashes = 0
        job.max_attempts = max_attempts or job.max_attempts

    def discard(self, job_id):
        job = self.jobs.pop(job_id)
        self.keys.pop((job.queue, job.key), None)

    def of_status(self, status, queue=None):
        return sorted(job.id for job in self.jobs.values()
                      if job.status == status and queue in (None, job.queue))

    def counts(self):
        return dict(Counter(job.status.value for job in self.jobs.values()))

    def figures(self, queue):
        mine = [job for job in self.jobs.values() if job.queue == queue]
        return {"ready": sum(job.status == READY and job.due for job in mine),
                "delayed": sum(job.status == READY and not job.due for job in mine),
                "reserved": sum(job.status == RESERVED for job in mine),
                "dead": sum(job.status == DEAD for job in mine),
                "waiting": sum(job.status == JobStatus.WAITING for job in mine)}


def check_row(row, job, now):
    """One job's row against the model's job (now: this host's clock)."""
    (job_id, queue, key, status, priority, attempts, max_attempts, crashes, token,
     available_at, lease_until, locked_by, process_id, cancelling) = row
    available_at, lease_until = as_time(available_at), as_time(lease_until)
    where = f"job {job_id}"
    assert (queue, key, priority, max_attempts) == (job.queue, job.key, job.priority,
                                                    job.max_attempts), where
    assert status == job.status, f"{where}: store says {status}, the model {job.status}"
    assert attempts <= max_attempts, f"{where}: attempts {attempts} > max {max_attempts}"
    assert (attempts, crashes) == (job.attempts, job.crashes), \
        f"{where}: attempts/crashes {attempts}/{crashes}, model {job.attempts}/{job.crashes}"
    assert token == job.token, f"{where} ({status}): token {token}, model {job.token}"
    assert bool(cancelling) == job.cancelling, f"{where}: cancel requested {cancelling}"
    if status == RESERVED:
        assert (lease_until > now + SKEW) == job.live, f"{where}: lease until {lease_until}"
        assert (locked_by, process_id) == (job.worker, job.process_id), where
    if status == READY:   # its next claim must not take it over max_attempts
        assert attempts < max_attempts, f"{where}: ready with attempts {attempts} of {max_attempts}"
        assert (available_at <= now + SKEW) == job.due, f"{where}: available at {available_at}"
        assert job.due or available_at > now + timedelta(days=1), f"{where}: delay too short"
    job.available_at, job.lease_until = available_at, lease_until


class Tally(Counter):
    """What the runs did: steps, and how often each interesting outcome happened."""

    @property
    def steps(self):
        # The check runs once before a sequence's first step and after every step.
        return self["checks"] - self["examples"]

    def summary(self):
        return ", ".join(f"{name}: {count}" for name, count in sorted(self.items())
                         if name not in ("checks", "examples"))
