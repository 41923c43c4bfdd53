"""A job's result: what its handler returned, as the JSON text kept with its
completion for result_ttl, and what a reader gets back.

A result is written in the transaction that marks its job done, by whoever writes
that completion in the worker (a group completion, a completion with the next
claim, job.transaction()); a job whose handler returned None costs no statement.
A value that is not JSON, or whose JSON is over max_result_bytes, fails the job
for good (ResultRefused): running it again would return the same.
"""
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import RejectedJob
from .jobs import Job, JobRun, Lease, utc_now
from .logs import current_host_pid
from .settings import BY_NAME


class ResultRefused(RejectedJob):
    """The handler's result cannot be kept: not JSON, or over max_result_bytes. Its
    message is ours (a size, an error class), never the value."""


@dataclass(frozen=True)
class KeptResult:
    """A result to write with its job's completion: the lease that completes it, who
    ran the attempt and since when (naive UTC), its JSON, kept for ttl seconds."""
    lease: Lease
    worker: str
    started_at: datetime
    value: str
    ttl: float


@dataclass(frozen=True)
class JobResult:
    """A done job's result as the store reads it back (never an expired one)."""
    value: Any           # the JSON, decoded
    attempt: int
    finished_at: datetime          # naive UTC, as every stored time
    expires_at: datetime | None    # None: kept as long as the job


def encoded(value: Any, max_bytes: int) -> str:
    """The value as compact JSON text; ResultRefused when it is not JSON or too big."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise ResultRefused("return value is not JSON: nested too deep") from None
    except (TypeError, ValueError) as exc:
        raise ResultRefused(f"return value is not JSON: {type(exc).__name__}") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ResultRefused(f"return value is {size} bytes, over the limit of {max_bytes} "
                            "(max_result_bytes)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:   # a lone surrogate: neither backend can store it
        raise ResultRefused("return value is not valid Unicode text (a lone surrogate)") \
            from None
    return text


def kept(job: Job) -> KeptResult | None:
    """What to write of job.result with the job's completion: None when there is
    nothing to keep (no result, or result_ttl 0); ResultRefused when it cannot be kept."""
    run = job.run or default_run()
    if job.result is None or run.result_ttl <= 0:
        return None
    return KeptResult(job.lease, run.worker, run.started_at,
                      encoded(job.result, run.max_result_bytes), run.result_ttl)


def default_run() -> JobRun:
    """The run of a job completed outside a worker (a script's own claim): this
    process, now, and the settings' defaults."""
    return JobRun(current_host_pid(), utc_now(), BY_NAME["result_ttl"].default,
                  BY_NAME["max_result_bytes"].default)


def decoded(text: str) -> Any:
    """A stored result's JSON as Python (the text was written by encoded())."""
    return json.loads(text)
