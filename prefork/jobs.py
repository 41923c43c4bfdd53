"""What a job is: the object handlers see, and the validation of new jobs.

Backend-neutral: the stores take a validated `NewJob` and return `Job`s.
"""
import enum
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ContextManager, NamedTuple, Protocol

from .errors import RejectedJob, UserError


def utc_now() -> datetime:
    """This host's clock in UTC, naive: the form every stored time takes."""
    return datetime.now(timezone.utc).replace(tzinfo=None)

# \A and \Z, not ^ and $: "$" also matches before a final newline, and a queue named
# "default\n" is one no worker claims. Callers use fullmatch; the anchors keep a .match() right.
JOB_TYPE_PATTERN = re.compile(r"\A[A-Za-z0-9_.:-]{1,128}\Z")
QUEUE_PATTERN = re.compile(r"\A[A-Za-z0-9_.:-]{1,64}\Z")
MAX_KEY_LENGTH = 191
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")   # C0, DEL and C1
MAX_PAYLOAD_DEPTH = 64   # levels of objects and arrays; deeper ones are refused at enqueue
TOO_DEEP = "payload nested too deep"
TOO_DEEP_TO_ENQUEUE = f"{TOO_DEEP}: more than {MAX_PAYLOAD_DEPTH} levels of objects and arrays"
# A JSON string (escapes included), and the brackets that open and close a level.
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
JSON_BRACKET = re.compile(r"[\[\]{}]")
PRIORITY_RANGE = (-32768, 32767)
MAX_DELAY = 100 * 366 * 86400      # seconds; also keeps available_at inside DATETIME
MAX_ATTEMPTS_LIMIT = 2 ** 32 - 1   # the column is INT UNSIGNED
# The payload's encoder, made once: json.dumps() with these options builds one per call.
PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

# What enqueue() takes as a payload: a dict, or its JSON text. Stored as JSON text.
Payload = dict[str, Any] | str | bytes | None


class JobStatus(enum.StrEnum):
    """A job's state. str-valued, so SQL parameters and JSON read as the words."""
    READY = "ready"          # including delayed ones (available_at in the future)
    RESERVED = "reserved"    # claimed under a lease
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"  # stopped by `cancel`: never run, or stopped while running
    WAITING = "waiting"      # a workflow's job that its workflow has not released yet


# The states a job ends in: prune removes them, `cancel` leaves them as they are.
FINISHED_STATES = (JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED)


class Outcome(str, enum.Enum):
    """How a job run by a worker ended, as the worker recorded it."""
    DONE = "done"            # completed under its lease
    RETRY = "retry"          # failed, will run again later
    DEAD = "dead"            # failed for good
    LOST = "lost"            # the lease was lost: another worker owns the job now
    RELEASED = "released"    # given back unfinished, its attempt restored (a stop)
    UNSAVED = "unsaved"      # done, its completion to be written with its batch's last
    CANCELLED = "cancelled"  # stopped by a cancellation (JobCancelled), not retried

    def __str__(self) -> str:
        return self.value


# The first character of the lease token of a workflow's member (the claim writes it,
# from the job's row): hex never holds it. Every path that ends a job has its lease
# or reads its row, so a member's end always takes its workflow's bookkeeping along.
MEMBER_TOKEN_MARK = "w"


def member_token(token: str) -> bool:
    """Whether a lease token is a workflow member's."""
    return token.startswith(MEMBER_TOKEN_MARK)


class Lease(NamedTuple):
    """A claim on one job: whoever holds the token may finish the job while the lease lives."""
    job_id: int
    token: str

    @property
    def in_workflow(self) -> bool:
        """Whether the job is a workflow's member: its end moves its workflow on."""
        return member_token(self.token)


@dataclass(frozen=True)
class JobRun:
    """One attempt of a claimed job, as its worker starts it: who runs it, since when
    (naive UTC), and how long its result is kept and how big it may be (the
    result_ttl and max_result_bytes settings)."""
    worker: str
    started_at: datetime
    result_ttl: float
    max_result_bytes: int


class Upstream(NamedTuple):
    """A job whose end released a workflow's job (Job.upstream()): its id, how it
    ended, and its result (None: none kept, or not done)."""
    id: int
    status: JobStatus
    result: Any


class CompletionStore(Protocol):
    """What a Job needs of the store it was claimed from (see store/contract.py)."""

    def completing(self, job: "Job") -> ContextManager[Any]: ...

    def upstream(self, job_id: int) -> list[Upstream]: ...


@dataclass
class Job:
    """A claimed job, as a handler sees it. `payload` is a dict decoded from JSON.
    `result` is what the job keeps once done: what the handler returns, or what it
    sets here (inside its job.transaction() block, when it uses one)."""
    id: int
    type: str
    queue: str
    payload_text: str = field(repr=False)
    attempt: int
    max_attempts: int
    idempotency_key: str | None
    lease_token: str = field(repr=False)
    crashes: int = 0
    payload: dict[str, Any] = field(default_factory=dict, repr=False)   # set by decode_payload
    finished: bool = False   # set once the completion transaction committed
    # What the handler returned, or set before its job.transaction() block ended:
    # JSON, kept with the job's completion for result_ttl (None: nothing is kept).
    result: Any = field(default=None, repr=False)
    run: JobRun | None = field(default=None, repr=False, compare=False)   # set by the worker
    _store: CompletionStore | None = field(default=None, repr=False, compare=False)

    @property
    def lease(self) -> Lease:
        """The job's claim: its id and lease token, which fence its completion."""
        return Lease(self.id, self.lease_token)

    def bind(self, store: CompletionStore) -> None:
        """Make store the one transaction() uses: a job claimed by another process
        (the parent, for a child forked per job) must not use that process's session."""
        self._store = store

    def upstream(self) -> list[Upstream]:
        """In a workflow, the jobs whose end released this one, in the order they were
        enqueued, each with how it ended and its result: a chain's previous step (the
        members of a group step; the last step of each chain in it), or a group's
        members for its callback. Empty for a first step or a job of no workflow.

            [charge] = job.upstream()      # the step before: one job
            amount = charge.result["amount"]
        """
        if self._store is None:
            raise RuntimeError("this Job was not claimed from a store: it has no workflow")
        return self._store.upstream(self.id)

    def transaction(self) -> ContextManager[Any]:
        """Context manager: a cursor in the transaction that marks this job done.

        Write the job's business effect with it; the effect and the completion
        commit together, and both are rolled back (LeaseLost raised) when the
        lease was lost to another worker. A result to keep is set as `job.result`
        inside the block: it commits with them (what the handler returns after the
        block is too late to be kept). The cursor is the backend's own
        (PyMySQL, or sqlite3 on SQLite); on both it takes `%s` placeholders.
        """
        if self._store is None:
            raise RuntimeError("this Job was not claimed from a store: it has no transaction")
        return self._store.completing(self)

    def decode_payload(self, max_bytes: int) -> dict[str, Any]:
        """Parse the payload; a malformed or oversized one is a permanent failure."""
        if len(self.payload_text.encode("utf-8")) > max_bytes:
            raise RejectedJob("oversized payload")
        try:
            payload = json.loads(self.payload_text)
        except RecursionError:   # nested past the interpreter's stack: no retry reads it
            raise RejectedJob(TOO_DEEP) from None
        except ValueError:
            raise RejectedJob("malformed payload") from None
        if not isinstance(payload, dict):
            raise RejectedJob("malformed payload")
        self.payload = payload
        return payload


@dataclass(frozen=True)
class NewJob:
    """A validated job ready to insert. delay is in seconds; run_at is a naive UTC datetime."""
    type: str
    payload_text: str
    queue: str = "default"
    key: str | None = None
    delay: float = 0.0
    run_at: datetime | None = None
    priority: int = 0
    max_attempts: int = 5
    concurrency_key: str | None = None   # the limit group within its type (prefork/limits)


def encode_payload(payload: Payload, max_bytes: int) -> str:
    """The payload as compact JSON text; UserError when it is not a JSON object, too big,
    nested too deep or not encodable as UTF-8."""
    if isinstance(payload, (str, bytes)):
        payload = parse_json(payload)
    if not isinstance(payload, dict):
        raise UserError("payload must be a JSON object")
    try:
        text = PAYLOAD_ENCODER.encode(payload)
    except RecursionError:
        raise UserError(TOO_DEEP_TO_ENQUEUE) from None
    except (TypeError, ValueError) as exc:
        raise UserError(f"payload is not JSON-serializable: {exc}") from None
    if _keys_collide(payload):
        raise UserError("payload is not JSON-serializable: two keys of one object are one "
                        "key in JSON (as 1 and \"1\" are), and a reader would keep one value")
    # ASCII text is its own UTF-8 (and holds no surrogate): no copy to count its bytes.
    size = len(text) if text.isascii() else len(_utf8(text, "payload"))
    if size > max_bytes:
        raise UserError(f"payload is {size} bytes, over the limit of {max_bytes} (max_payload_bytes)")
    # Every opening bracket, strings included, bounds the depth from above at the cost
    # of two counts: the exact scan runs only for the rare payload that bound allows.
    if text.count("{") + text.count("[") > MAX_PAYLOAD_DEPTH and \
            json_depth(text) > MAX_PAYLOAD_DEPTH:
        raise UserError(TOO_DEEP_TO_ENQUEUE)
    return text


def _keys_collide(payload: dict[str, Any]) -> bool:
    """Whether an object of the payload (json.dumps has written it) has two keys that
    JSON writes alike: {1: "a", "1": "b"} becomes {"1":"a","1":"b"}. Only keys that are
    not str can collide; an iterative walk, as the payload may nest deep."""
    stack: list[Any] = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if not all(isinstance(key, str) for key in value) and \
                    len({_json_key(key) for key in value}) < len(value):
                return True
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _json_key(key: Any) -> str:
    """A key as json.dumps writes it (a str, int, float, bool or None: it accepted it)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    return float.__repr__(key) if isinstance(key, float) else int.__repr__(key)


def parse_json(text: str | bytes, what: str = "payload") -> Any:
    """JSON text (the payload, a line of a jobs file) as Python; any problem is a
    one-line UserError naming `what`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON {what}: {exc.msg} at position {exc.pos}") from None
    except UnicodeDecodeError:   # bytes that are not UTF-8 (or -16, -32) text
        raise UserError(f"invalid JSON {what}: not UTF-8 text") from None
    except RecursionError:       # deeper than the parser's stack, far past the limit
        raise UserError(TOO_DEEP_TO_ENQUEUE) from None


def json_depth(text: str) -> int:
    """How many levels of objects and arrays JSON text nests, counted without recursion
    (brackets inside strings do not count)."""
    depth = deepest = 0
    for bracket in JSON_BRACKET.findall(JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _utf8(text: str, what: str) -> bytes:
    """The text as UTF-8; a lone surrogate (from a "\\udc80" escape or an undecodable
    argv byte) cannot be stored by either backend, so it is refused here, not at insert."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{what} is not valid Unicode text (a lone surrogate)") from None


def check_key(key: object, what: str = "idempotency key") -> None:
    """An idempotency (or concurrency) key both backends store and compare alike."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH:
        raise UserError(f"{what} must be 1-{MAX_KEY_LENGTH} characters")
    if CONTROL_CHARACTER.search(key):
        raise UserError(f"{what} must not contain control characters")
    if key != key.strip():
        # MariaDB's utf8mb4_bin ignores trailing spaces in comparisons, SQLite does not:
        # "invoice-7 " would be the same job as "invoice-7" on one backend only.
        raise UserError(f"{what} must not begin or end with whitespace")
    _utf8(key, what)


def new_job(job_type: str, payload: Payload = None, *, queue: str = "default",
            key: str | None = None, delay: float = 0.0, run_at: datetime | None = None,
            priority: int = 0, max_attempts: int = 5, max_payload_bytes: int = 65536,
            concurrency_key: str | None = None) -> NewJob:
    """Validate enqueue arguments; any problem is a one-line UserError. Whatever passes
    is insertable on either backend (a file of jobs is checked whole before any insert)."""
    if not isinstance(job_type, str) or not JOB_TYPE_PATTERN.fullmatch(job_type):
        raise UserError(f"invalid job type {job_type!r}: use 1-128 of A-Z a-z 0-9 _ . : -")
    if not isinstance(queue, str) or not QUEUE_PATTERN.fullmatch(queue):
        raise UserError(f"invalid queue name {queue!r}: use 1-64 of A-Z a-z 0-9 _ . : -")
    if key is not None:
        check_key(key)
    if concurrency_key is not None:
        check_key(concurrency_key, "concurrency key")
    if not isinstance(delay, (int, float)) or not 0 <= delay <= MAX_DELAY:  # also NaN and inf
        raise UserError(f"delay must be a number of seconds from 0 to {MAX_DELAY} (100 years)")
    if not isinstance(priority, int) or not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
        raise UserError(f"priority must be an integer from {PRIORITY_RANGE[0]} to {PRIORITY_RANGE[1]}")
    if not isinstance(max_attempts, int) or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT:
        raise UserError(f"max attempts must be from 1 to {MAX_ATTEMPTS_LIMIT}")
    text = encode_payload({} if payload is None else payload, max_payload_bytes)
    return NewJob(job_type, text, queue, key, float(delay), run_at, priority, max_attempts,
                  concurrency_key)
