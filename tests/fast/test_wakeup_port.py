"""Cross-host wake-ups without a database: the wakeup_bind value, the addresses read
from the registry (trusted no more than a datagram), the pacer that bounds the looks
rings may cause, and the port itself on loopback: garbage is ignored, reads are
bounded, a ring for a queue we work moves the next look."""
import select
import socket

import pytest

from prefork.errors import UserError
from prefork.wakeups import remote, udp
from prefork.wakeups.doorbell import RINGS_PER_DRAIN, read_rings


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:0", ("127.0.0.1", 0)),
    ("10.0.0.5:8188", ("10.0.0.5", 8188)),
    ("[::1]:8188", ("::1", 8188)),
    (" 192.168.1.2:9 ", ("192.168.1.2", 9)),
    ("db-host.internal:8188", ("db-host.internal", 8188)),
])
def test_a_bind_value_is_host_and_port(text, expected):
    assert udp.parse_bind(text) == expected


@pytest.mark.parametrize("text", ["127.0.0.1", ":8188", "127.0.0.1:port", "127.0.0.1:70000",
                                  "127.0.0.1:8188/x", "user@127.0.0.1:8188", "[::1:8188",
                                  "127.0.0.1:-1"])
def test_a_bad_bind_value_is_a_one_line_error_naming_it(text):
    with pytest.raises(UserError) as raised:
        udp.parse_bind(text)
    assert "wakeup_bind" in str(raised.value) and "\n" not in str(raised.value)


def test_the_wildcard_is_refused_it_names_no_address_to_publish():
    with pytest.raises(UserError, match="not every interface"):
        udp.WakeupPort("0.0.0.0:0")


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:8188", udp.Address("127.0.0.1", 8188)),
    ("[fd00::5]:8188", udp.Address("fd00::5", 8188)),
])
def test_a_published_address_is_read_back(text, expected):
    assert udp.parse_published(text) == expected
    assert udp.parse_published(expected.text()) == expected


@pytest.mark.parametrize("text", ["", "127.0.0.1", "127.0.0.1:0", "example.com:8188",
                                  "127.0.0.1:99999", "127.0.0.1:80/x", "a:b:c", "\xff:1"])
def test_a_registry_row_that_is_not_a_numeric_address_is_skipped(text):
    assert udp.parse_published(text) is None


def test_peers_come_from_well_formed_rows_and_are_read_once_per_cache_period():
    reads = []

    def read():
        reads.append(1)
        return [("127.0.0.1:9001", "mail,default"), ("junk", "default"), (None, "x")]

    key = "test/peers-cached"
    found = remote.peers(key, read)
    assert found == (remote.Peer(udp.Address("127.0.0.1", 9001),
                                 frozenset({"mail", "default"})),)
    assert remote.peers(key, read) == found and len(reads) == 1


def test_a_failed_read_counts_as_nobody_and_is_not_repeated_at_once():
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError("no such column: wakeup_address")

    assert remote.peers("test/peers-broken", broken) == ()
    assert remote.peers("test/peers-broken", broken) == () and len(calls) == 1


def test_a_read_not_allowed_now_keeps_what_was_known_and_caches_nothing():
    assert remote.peers("test/peers-later", lambda: None) == ()
    assert remote.peers("test/peers-later", lambda: [("127.0.0.1:9", "q")]) != ()


# -- the pacer -------------------------------------------------------------------------

def test_a_burst_looks_at_once_then_rings_wait_for_tokens():
    pacer = udp.LookPacer(rate=10.0, burst=3.0)
    far = 1000.0
    assert [pacer.look_at(0.0, far) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pacer.look_at(0.0, far) == pytest.approx(0.1)   # the next token's time


def test_rings_while_a_look_is_due_cost_no_token():
    pacer = udp.LookPacer(rate=10.0, burst=1.0)
    assert pacer.look_at(0.0, 1000.0) == 0.0
    due = pacer.look_at(0.0, 1000.0)
    assert due == pytest.approx(0.1)
    for _ in range(1000):   # a flood while that look is due
        assert pacer.look_at(0.01, due) == due
    assert pacer.look_at(0.1, 0.1) == 0.1


def test_a_flood_gets_at_most_the_rate_of_looks():
    pacer, rate, burst = udp.LookPacer(rate=20.0, burst=5.0), 20.0, 5.0
    looks, next_look, now = 0, 1e9, 0.0
    while now < 10.0:   # a ring every millisecond for 10 s; each look happens when due
        if next_look <= now:
            looks, next_look = looks + 1, 1e9
        next_look = pacer.look_at(now, next_look)
        now += 0.001
    assert looks <= burst + rate * 10.0 + 1


def test_a_ring_after_the_poll_is_due_changes_nothing():
    pacer = udp.LookPacer()
    assert pacer.look_at(5.0, 4.0) == 4.0 and pacer.tokens == udp.LOOK_BURST


# -- the port on loopback -----------------------------------------------------------------

@pytest.fixture
def port():
    opened = udp.WakeupPort("127.0.0.1:0")
    yield opened
    opened.close()


@pytest.fixture
def sender():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        yield sock


def wait_readable(port):
    assert select.select([port.fileno()], [], [], 5.0)[0], "no datagram arrived"


def test_the_port_publishes_the_port_it_got(port):
    assert port.address.host == "127.0.0.1" and port.address.port > 0
    assert port.address.text() == f"127.0.0.1:{port.address.port}"


def test_garbage_moves_no_look_and_a_ring_for_our_queue_does(port, sender):
    target = ("127.0.0.1", port.address.port)
    for garbage in (b"\xff\xfe", b"default", b"default -1", b"x" * 600, b"other-queue 5"):
        sender.sendto(garbage, target)
    wait_readable(port)
    assert port.look_at(["default"], 0.0, 30.0, anyone_waiting=True) == 30.0
    sender.sendto(b"default 1", target)
    wait_readable(port)
    assert port.look_at(["default"], 0.0, 30.0, anyone_waiting=True) == 0.0


def test_a_ring_with_nobody_waiting_moves_nothing(port, sender):
    sender.sendto(b"default 1", ("127.0.0.1", port.address.port))
    wait_readable(port)
    assert port.look_at(["default"], 0.0, 30.0, anyone_waiting=False) == 30.0


def test_one_read_takes_at_most_rings_per_drain_datagrams(port, sender):
    port.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)   # room for them all
    for _ in range(RINGS_PER_DRAIN + 10):
        sender.sendto(b"default 1", ("127.0.0.1", port.address.port))
    wait_readable(port)
    assert read_rings(port.sock) == {"default": RINGS_PER_DRAIN}
    assert read_rings(port.sock) == {"default": 10}


def test_ringing_sends_each_peer_its_queues_only(port, sender):
    other = udp.WakeupPort("127.0.0.1:0")
    try:
        remote.ring([remote.Peer(port.address, frozenset({"mail"})),
                     remote.Peer(other.address, frozenset({"default"}))],
                    {"mail": 2, "reports": 1})
        wait_readable(port)
        assert read_rings(port.sock) == {"mail": 2}
        assert read_rings(other.sock) == {}
    finally:
        other.close()
