"""The pipe protocol between a child and its parent: every kind round-trips, and
the largest message still fits one atomic write."""
import os
import secrets
import select

import pytest

from prefork.settings import MAX_CLAIM_BATCH
from prefork.jobs import Lease, Outcome
from prefork.supervisor import protocol
from prefork.supervisor.children import ChildProcess
from prefork.supervisor.protocol import Kind

LARGEST_ID = 2 ** 64 - 1   # BIGINT UNSIGNED
TOKEN_LENGTH = len(secrets.token_hex(16))   # as the stores make them


def lease(job_id=LARGEST_ID):
    return Lease(job_id, secrets.token_hex(16))


# One example of every kind; a kind added without one fails the test below.
EXAMPLES = {
    Kind.READY: [protocol.Ready(1234), protocol.Ready(None)],
    Kind.HELD: [protocol.Held((lease(7), lease(8))), protocol.Held(())],
    Kind.BUSY: [protocol.Busy(lease(42), "email.send", "default")],
    Kind.WAITING: [protocol.Waiting()],
    Kind.IDLE: [protocol.Idle(outcome, 0.25) for outcome in Outcome],
    Kind.SAVED: [protocol.Saved((3, 5)), protocol.Saved(())],
    Kind.RETIRE: [protocol.Retire("max-items")],
    Kind.RETURNED: [protocol.Returned((lease(7), lease(9))), protocol.Returned(())],
    Kind.DATABASE_FAILED: [protocol.DatabaseFailed()],
}


@pytest.mark.parametrize("kind", list(Kind))
def test_every_kind_round_trips(kind):
    assert protocol.MESSAGE_TYPES[kind].kind is kind
    assert EXAMPLES.get(kind), f"no example of {kind}: add one to EXAMPLES"
    for message in EXAMPLES[kind]:
        line = protocol.encode(message)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        decoded = protocol.decode(line.rstrip(b"\n"))
        assert decoded == message and type(decoded) is type(message)


def test_a_child_that_says_the_database_failed_it_does_not_charge_its_job():
    """Every death running a job costs the job (a handler's os._exit(4) too), except a
    child's exit on its own database error, which it announces first."""
    read_fd, write_fd = os.pipe()
    try:
        child = ChildProcess(1, 0, 0, read_fd, write_fd, write_fd)
        child.apply(protocol.Busy(lease(42), "email.send", "default"))
        assert child.charge_job
        child.apply(protocol.DatabaseFailed())
        assert not child.charge_job
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_a_returned_job_claimed_again_stays_held():
    """A child releases job 42 while we claim it again and hand it to the same child:
    its Returned message, read after, names the old lease; the new one stays held, so
    that the child's death gives the job back."""
    read_fd, write_fd = os.pipe()
    try:
        child = ChildProcess(1, 0, 0, read_fd, write_fd, write_fd)
        first, again = lease(42), lease(42)
        child.hand(b"{}\n", first)
        child.hand(b"{}\n", again)
        child.apply(protocol.Returned((first,)))
        assert child.held == (again,)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_decoded_leases_and_outcomes_are_typed():
    held = protocol.decode(protocol.encode(protocol.Held((lease(7),))).rstrip())
    assert isinstance(held.leases[0], Lease)
    idle = protocol.decode(protocol.encode(protocol.Idle(Outcome.DEAD, 1.5)).rstrip())
    assert idle.outcome is Outcome.DEAD and idle.outcome == "dead"


def test_the_largest_messages_fit_one_atomic_write():
    assert TOKEN_LENGTH == 32
    full_batch = protocol.Held(tuple(lease(LARGEST_ID - n) for n in range(MAX_CLAIM_BATCH)))
    busy = protocol.Busy(lease(), "t" * 128, "q" * 64)
    for message in (full_batch, busy):
        assert len(protocol.encode(message)) <= select.PIPE_BUF


def test_a_message_over_pipe_buf_is_refused():
    with pytest.raises(protocol.ProtocolError):
        protocol.encode(protocol.Held(tuple(lease() for _ in range(4 * MAX_CLAIM_BATCH))))


def test_a_line_that_is_no_message_is_a_protocol_error():
    for line in (b"{", b'["nonsense"]', b'["busy",1]', b"[]"):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(line)


def test_the_reader_waits_for_the_end_of_a_line():
    messages = [protocol.Busy(lease(1), "a", "default"), protocol.Idle(Outcome.DONE, 0.001)]
    data = b"".join(protocol.encode(message) for message in messages)
    reader = protocol.LineReader(-1, protocol.decode)
    cut = len(data) // 3
    assert reader.feed(data[:cut]) == []
    assert reader.feed(data[cut:]) == messages
    assert reader.buffer == b""


def test_send_and_read_through_a_pipe():
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(read_fd, False)
        reader = protocol.LineReader(read_fd, protocol.decode)
        assert reader.read() == []
        assert protocol.send(write_fd, protocol.Waiting())
        assert protocol.send(write_fd, protocol.Retire("max-memory"))
        assert reader.read() == [protocol.Waiting(), protocol.Retire("max-memory")]
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_messages_sent_together_arrive_in_one_read_or_one_write_each_past_pipe_buf():
    """A child forked per job sends two messages in one write (one wake-up of the
    parent); together over PIPE_BUF, each goes in a write of its own, still whole."""
    read_fd, write_fd = os.pipe()
    full_batch = protocol.Held(tuple(lease(LARGEST_ID - n) for n in range(MAX_CLAIM_BATCH)))
    try:
        os.set_blocking(read_fd, False)
        reader = protocol.LineReader(read_fd, protocol.decode)
        pair = [protocol.Ready(None), protocol.Busy(lease(9), "a", "default")]
        assert protocol.send(write_fd, *pair)
        assert os.read(read_fd, 65536) == b"".join(map(protocol.encode, pair))
        big = [full_batch, full_batch]
        assert 2 * len(protocol.encode(full_batch)) > select.PIPE_BUF
        assert protocol.send(write_fd, *big)
        assert reader.read() == big
        assert protocol.send(write_fd)   # nothing to send: no write
        assert reader.read() == []
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_send_says_when_the_parent_is_gone():
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        assert not protocol.send(write_fd, protocol.Waiting())
    finally:
        os.close(write_fd)


def test_a_handed_job_round_trips_whole_through_a_pipe_in_pieces():
    """A handed job's line may exceed PIPE_BUF (a big payload): the child's reader
    puts it together from the pieces, whatever the payload holds."""
    from prefork.jobs import Job
    payload = '{"text": "line one\\nline two \u00e9\u4e2d", "pad": "%s"}' % ("x" * 70000)
    job = Job(id=LARGEST_ID, type="email.send", queue="default", payload_text=payload,
              attempt=2, max_attempts=5, idempotency_key="k\n1", lease_token="0" + "a" * 31,
              crashes=1)
    line = protocol.encode_job(job)
    assert line.count(b"\n") == 1 and len(line) > select.PIPE_BUF
    reader = protocol.LineReader(-1, protocol.decode_job)
    pieces = [line[offset:offset + 4096] for offset in range(0, len(line), 4096)]
    got = [decoded for piece in pieces for decoded in reader.feed(piece)]
    assert got == [job]
    assert got[0].payload_text == payload and got[0].lease == job.lease


def test_a_line_that_is_no_handed_job_is_refused():
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_job(b'["busy",[1,"x"],"t","q"]')
