"""What a producer does with the registry's wake-up addresses, whoever wrote the rows:
it reads a bounded number of rows, makes one peer of an address however many rows
publish it, and rings a bounded number of addresses (real stores, real UDP sockets)."""
import socket
import uuid
from contextlib import ExitStack

import pytest
from conftest import wait_until

from prefork.wakeups import remote, udp
from prefork.wakeups.doorbell import read_rings

ROW = ("INSERT INTO prefork_processes (host, pid, state, queues, workers, version,"
       " started_at, heartbeat_at, wakeup_address)"
       " VALUES ('forged', %s, 'running', %s, 1, '0', %s, %s, %s)")
OLD, FRESH = "2020-01-01 00:00:00.000000", "2030-01-01 00:00:00.000000"


def forge(db, count, address, queues="default", heartbeat_at=OLD):
    for n in range(count):
        db.execute(ROW, (n + 1, queues, OLD, heartbeat_at, address))


def listeners(stack, count):
    """`count` UDP sockets on loopback, non-blocking, closed with the stack."""
    socks = []
    for _ in range(count):
        sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        socks.append(sock)
    return socks


def text(sock):
    return udp.Address(*sock.getsockname()).text()


def ring_once(store):
    """One producer's ring for a job in `default`, through a fresh cache entry."""
    remote.ring(remote.peers(uuid.uuid4().hex, store.wakeup_peers), {"default": 1})


@pytest.fixture
def store(backend_store):
    return backend_store()


def test_a_read_takes_a_bounded_number_of_rows_the_freshest_first(store, db):
    forge(db, remote.MAX_PEER_ROWS + 200, "127.0.0.1:9")
    forge(db, 3, "127.0.0.2:9", heartbeat_at=FRESH)
    rows = store.wakeup_peers()
    assert len(rows) == remote.MAX_PEER_ROWS
    assert [row[0] for row in rows[:3]] == ["127.0.0.2:9"] * 3


def test_a_ring_reaches_a_bounded_number_of_addresses(store, db):
    with ExitStack() as stack:
        socks = listeners(stack, remote.MAX_RING_ADDRESSES + 8)
        for sock in socks:
            forge(db, 1, text(sock), heartbeat_at=FRESH)
        ring_once(store)
        seen = set()

        def sweep():
            seen.update(n for n, sock in enumerate(socks) if read_rings(sock))
            return len(seen) >= remote.MAX_RING_ADDRESSES

        wait_until(sweep, message="the rings of the first addresses")
        sweep()   # sent before ring() returned: no other may come late
        assert len(seen) == remote.MAX_RING_ADDRESSES


def test_an_address_many_rows_publish_gets_one_datagram_a_ring(store, db):
    with ExitStack() as stack:
        (target,) = listeners(stack, 1)
        forge(db, 100, text(target), heartbeat_at=FRESH)
        forge(db, 1, text(target), queues="mail", heartbeat_at=FRESH)
        ring_once(store)
        got = wait_until(lambda: read_rings(target), message="the ring")
        datagrams = []
        while True:
            try:
                datagrams.append(target.recv(512))
            except BlockingIOError:
                break
        assert got == {"default": 1} and datagrams == []
