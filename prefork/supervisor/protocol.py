"""The pipe between a child and its parent: every message a child sends, and how
it travels. The encoder and the decoder live here together, so the two sides
cannot drift apart.

A message is one line of compact JSON, a list: the kind, then the fields in
order, e.g. ["busy",[42,"9f0c..."],"email.send","default"]. A child writes
each with a single os.write() on a blocking pipe. POSIX makes a write of at
most PIPE_BUF bytes (4096 on Linux) atomic: it is never interleaved with
another write nor cut short by a signal. encode() refuses a longer line; the
largest message we send (held, with a full claim batch of leases) fits with
room to spare (tests/fast/test_protocol.py checks it).

The parent reads what is there without blocking (LineReader) and decodes each
complete line; a line cut across two reads waits in the buffer.

The other way, a child handed its jobs by the parent (claimer = supervisor) reads
them from its wake-up pipe, one line of JSON each (encode_job, decode_job). The
parent alone writes that pipe, so a line longer than PIPE_BUF may go in pieces:
what does not fit waits in the parent's outbox of that child.
"""
import enum
import json
import os
import select
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Optional, Sequence, TypeVar, Union

from ..jobs import Job, Lease, Outcome

PIPE_BUF = select.PIPE_BUF
READ_SIZE = 65536


class Kind(str, enum.Enum):
    """The kinds of message a child sends its parent."""
    READY = "ready"        # connected and about to claim
    HELD = "held"          # jobs claimed in a batch, not started (replaces the last list)
    BUSY = "busy"          # running this job now
    WAITING = "waiting"    # no job ready: wake me when there is one
    IDLE = "idle"          # the running job ended, with this outcome, after so many seconds
    SAVED = "saved"        # the unsaved completions are written; these ids were lost
    RETIRE = "retire"      # recycle me (max-items, max-memory) when it suits the pool
    RETURNED = "returned"  # jobs you handed me, released unstarted
    DATABASE_FAILED = "database_failed"   # I exit: the database failed me, not my job

    def __str__(self) -> str:
        return self.value


def _leases(pairs: Sequence[Sequence[Any]]) -> tuple[Lease, ...]:
    return tuple(Lease(int(job_id), str(token)) for job_id, token in pairs)


@dataclass(frozen=True)
class Ready:
    kind: ClassVar[Kind] = Kind.READY
    connection: Optional[int]   # the database's id of the child's session (None: unknown)

    def fields(self) -> list[Any]:
        return [self.connection]

    @classmethod
    def from_fields(cls, connection: Optional[int]) -> "Ready":
        return cls(connection)


@dataclass(frozen=True)
class Held:
    kind: ClassVar[Kind] = Kind.HELD
    leases: tuple[Lease, ...]

    def fields(self) -> list[Any]:
        return [[list(lease) for lease in self.leases]]

    @classmethod
    def from_fields(cls, leases: Sequence[Sequence[Any]]) -> "Held":
        return cls(_leases(leases))


@dataclass(frozen=True)
class Busy:
    kind: ClassVar[Kind] = Kind.BUSY
    lease: Lease
    type: str
    queue: str

    def fields(self) -> list[Any]:
        return [list(self.lease), self.type, self.queue]

    @classmethod
    def from_fields(cls, lease: Sequence[Any], job_type: str, queue: str) -> "Busy":
        return cls(_leases([lease])[0], job_type, queue)


@dataclass(frozen=True)
class Waiting:
    kind: ClassVar[Kind] = Kind.WAITING

    def fields(self) -> list[Any]:
        return []

    @classmethod
    def from_fields(cls) -> "Waiting":
        return cls()


@dataclass(frozen=True)
class Idle:
    kind: ClassVar[Kind] = Kind.IDLE
    outcome: Outcome
    seconds: float   # as the child timed it: we may read the messages late

    def fields(self) -> list[Any]:
        return [self.outcome.value, round(self.seconds, 6)]

    @classmethod
    def from_fields(cls, outcome: str, seconds: float) -> "Idle":
        return cls(Outcome(outcome), float(seconds))


@dataclass(frozen=True)
class Saved:
    kind: ClassVar[Kind] = Kind.SAVED
    lost: tuple[int, ...]   # ids of the unsaved jobs whose lease was lost

    def fields(self) -> list[Any]:
        return [list(self.lost)]

    @classmethod
    def from_fields(cls, lost: Sequence[int]) -> "Saved":
        return cls(tuple(int(job_id) for job_id in lost))


@dataclass(frozen=True)
class Retire:
    kind: ClassVar[Kind] = Kind.RETIRE
    reason: str   # max-items or max-memory

    def fields(self) -> list[Any]:
        return [self.reason]

    @classmethod
    def from_fields(cls, reason: str) -> "Retire":
        return cls(reason)


@dataclass(frozen=True)
class Returned:
    """Jobs the parent handed (claimer = supervisor) that the child released
    unstarted (it stops, retires, or ran a slow job while they waited): no longer
    held for it. Those alone: the parent may have handed more since."""
    kind: ClassVar[Kind] = Kind.RETURNED
    leases: tuple[Lease, ...]

    def fields(self) -> list[Any]:
        return [[list(lease) for lease in self.leases]]

    @classmethod
    def from_fields(cls, leases: Sequence[Sequence[Any]]) -> "Returned":
        return cls(_leases(leases))


@dataclass(frozen=True)
class DatabaseFailed:
    """Sent before a child exits on a database error (FATAL_EXIT): its running job
    goes back uncharged. A handler that ends its process sends none, so its job
    pays for the death."""
    kind: ClassVar[Kind] = Kind.DATABASE_FAILED

    def fields(self) -> list[Any]:
        return []

    @classmethod
    def from_fields(cls) -> "DatabaseFailed":
        return cls()


Message = Union[Ready, Held, Busy, Waiting, Idle, Saved, Retire, Returned, DatabaseFailed]
MESSAGE_TYPES: dict[Kind, type[Message]] = {
    message_type.kind: message_type
    for message_type in (Ready, Held, Busy, Waiting, Idle, Saved, Retire, Returned,
                         DatabaseFailed)}


class ProtocolError(ValueError):
    """A line that is no message of ours, or a message too long for one atomic write."""


def encode(message: Message) -> bytes:
    """One message as its line, newline included."""
    line = json.dumps([message.kind.value, *message.fields()], separators=(",", ":"))
    data = line.encode("utf-8") + b"\n"
    if len(data) > PIPE_BUF:
        raise ProtocolError(f"{message.kind} message of {len(data)} bytes exceeds PIPE_BUF")
    return data


def decode(line: bytes) -> Message:
    """One line (without its newline) as the message it encodes."""
    try:
        kind, *values = json.loads(line)
        return MESSAGE_TYPES[Kind(kind)].from_fields(*values)
    except (ValueError, TypeError, KeyError) as exc:
        raise ProtocolError(f"not a message: {line[:80]!r}") from exc


def send(fd: int, *messages: Message) -> bool:
    """Write messages to the pipe in one write (one wake-up of the parent), atomic
    while they fit in PIPE_BUF together, else one write each; False when the reader
    (the parent) is gone."""
    lines = [encode(message) for message in messages]
    writes = [b"".join(lines)] if sum(map(len, lines)) <= PIPE_BUF else lines
    try:
        for data in writes:
            os.write(fd, data)
        return True
    except OSError:
        return False


def encode_job(job: Job) -> bytes:
    """A job the parent claimed, as the line it writes into a child's pipe."""
    fields = [job.id, job.lease_token, job.type, job.queue, job.payload_text, job.attempt,
              job.max_attempts, job.idempotency_key, job.crashes]
    return json.dumps(fields, separators=(",", ":")).encode("utf-8") + b"\n"


def decode_job(line: bytes) -> Job:
    """A handed job's line (without its newline) as the Job it encodes, not yet bound
    to the child's store."""
    try:
        job_id, token, job_type, queue, payload, attempt, max_attempts, key, crashes = \
            json.loads(line)
        return Job(id=int(job_id), type=str(job_type), queue=str(queue), payload_text=payload,
                   attempt=int(attempt), max_attempts=int(max_attempts), idempotency_key=key,
                   lease_token=str(token), crashes=int(crashes))
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"not a handed job: {line[:80]!r}") from exc


Decoded = TypeVar("Decoded")


class LineReader(Generic[Decoded]):
    """One end of a pipe: reads what is there, returns what its complete lines encode
    (messages, on the parent's end of a child's pipe)."""

    def __init__(self, fd: int, decoder: Callable[[bytes], Decoded]) -> None:
        self.fd = fd
        self.decoder = decoder
        self.buffer = b""

    def read(self) -> list[Decoded]:
        """The messages complete so far; the fd must be non-blocking."""
        try:
            while True:
                chunk = os.read(self.fd, READ_SIZE)
                if not chunk:
                    break
                self.buffer += chunk
        except BlockingIOError:
            pass
        return self.feed(b"")

    def feed(self, data: bytes) -> list[Decoded]:
        """Add bytes read elsewhere; returns what the lines now complete encode."""
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        return [self.decoder(line) for line in lines if line]
