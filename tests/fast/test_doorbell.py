"""The doorbell's datagram parser: anyone of our uid may send the supervisor any bytes,
so only "<queue> <count>" (a queue name, ASCII digits) counts, the count is capped,
and nothing a datagram holds may raise."""
import random

import pytest

from prefork.wakeups.doorbell import MAX_DATAGRAM, MAX_RING_COUNT, parse_ring


@pytest.mark.parametrize("data, expected", [
    (b"default 1", ("default", 1)),
    (b"payroll-export 3", ("payroll-export", 3)),
    (b"a.b:c_d-e 0", ("a.b:c_d-e", 0)),
    (b"mail 0007", ("mail", 7)),
    (f"mail {MAX_RING_COUNT + 1}".encode(), ("mail", MAX_RING_COUNT)),
    (b"mail " + b"9" * 500, ("mail", MAX_RING_COUNT)),
    (b"mail " + b"0" * 400 + b"12", ("mail", 12)),
])
def test_a_well_formed_ring_is_read_and_its_count_capped(data, expected):
    assert parse_ring(data) == expected


@pytest.mark.parametrize("data", [
    "default ²".encode(),            # isdigit() is true, int() refuses it
    "default ٣".encode(),            # an Arabic-Indic digit: int() would take it
    "default １".encode(),           # a fullwidth digit
    b"default",                      # no count
    b"default ",
    b"default -1",
    b"default +1",
    b"default 1 ",
    b"default 1\n",
    b"default\n 1",
    b"default  1",
    b" 1",
    b"",
    b"default 1.5",
    b"default 0x10",
    b"default \xff",
    b"\xff\xfe 1",
    b"q" * 65 + b" 1",              # longer than a queue name may be
    b"def/ault 1",
    b"default\x00 1",
    b"default 1\x00",
    "défaut 1".encode(),
])
def test_anything_else_is_ignored(data):
    assert parse_ring(data) is None


def test_no_datagram_makes_the_parser_raise():
    """Thousands of random datagrams, biased towards what looks nearly right."""
    rng = random.Random(11)
    pieces = [b"default", b" ", b"1", b"\xc2\xb2", b"\xff", b"\n", b"-", b"9" * 40,
              "٣".encode(), b"\x00", b"q" * 70, b"mail", b"0"]
    for _ in range(5000):
        if rng.random() < 0.5:
            data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        else:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        result = parse_ring(data[:MAX_DATAGRAM])
        assert result is None or (isinstance(result[0], str)
                                  and 0 <= result[1] <= MAX_RING_COUNT), data
