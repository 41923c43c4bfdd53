"""A real job through the store's own API on a scratch queue: enqueue, claim,
complete, read back, then remove. No supervisor works that queue (its name is
this run's alone), so nothing else can take the job.

It goes through the real table, as the account's jobs will: a scratch table
would not prove the account's privileges on it. So it takes one job id, which
is never used again (the output says so)."""
import secrets
import time
from collections.abc import Callable

from ..jobs import JobStatus, new_job
from ..logs import current_host_pid
from ..store.contract import Store
from .checks import Check, Status, failure, reported_errors

NAME = "round trip"
JOB_TYPE = "prefork.doctor"
SCRATCH_PREFIX = "prefork-doctor-"


def scratch_queue() -> str:
    """A queue name of this run's own: prefork-doctor-<8 hex digits>."""
    return SCRATCH_PREFIX + secrets.token_hex(4)


def round_trip(store: Store, queue: str, lease_seconds: float,
               remove: Callable[[int], bool]) -> Check:
    """remove(job_id) deletes the scratch job; False when the account may not delete."""
    started = time.monotonic()
    try:
        job_id = store.enqueue(new_job(JOB_TYPE, {"doctor": queue}, queue=queue,
                                       max_attempts=1))
    except reported_errors() as exc:
        return Check(NAME, Status.FAIL, f"enqueue: {failure(NAME, exc).detail}")
    try:
        trouble = _claim_and_complete(store, job_id, queue, lease_seconds)
    except reported_errors() as exc:   # said with where the job is left
        trouble = f"job {job_id} was enqueued; then {failure(NAME, exc).detail}"
    elapsed_ms = (time.monotonic() - started) * 1000
    fate = (f"removed (an id is never reused: the next job's is above {job_id})"
            if remove(job_id) else _left(store, job_id, queue))
    if trouble:
        return Check(NAME, Status.FAIL, f"{trouble}; the job {fate}")
    return Check(NAME, Status.OK, f"job {job_id} enqueued, claimed and completed in "
                 f"{elapsed_ms:.0f} ms on scratch queue {queue}; {fate}")


def _claim_and_complete(store: Store, job_id: int, queue: str, lease_seconds: float) -> str:
    """What went wrong, or "" when the job was claimed, completed and reads back done."""
    claimed = store.claim([queue], current_host_pid(), lease_seconds)
    if [job.id for job in claimed] != [job_id]:
        got = ", ".join(str(job.id) for job in claimed) or "nothing"
        return f"job {job_id} was enqueued on {queue}, but the claim returned {got}"
    if not store.complete(claimed[0]):
        return f"job {job_id} was claimed, but its completion was refused (lease lost)"
    row = store.get(job_id)
    status = row["status"] if row else "missing"
    if status != JobStatus.DONE:
        return f"job {job_id} was completed, but reads back {status}"
    return ""


def _left(store: Store, job_id: int, queue: str) -> str:
    """Where a job the account could not delete stays, and what removes it."""
    row = store.get(job_id)
    status = row["status"] if row else "missing"
    remedy = ("`prefork-queue prune --done-older-than AGE`, run by an admin account, removes "
              "it with the other done jobs" if status == JobStatus.DONE else
              "an admin account may delete it")
    return (f"is left {status} in queue {queue}, which no worker claims (this account has no "
            f"DELETE, as least privilege wants): {remedy}")
