"""Cross-host wake-ups: a supervisor with `wakeup_bind` listens on a UDP port and
publishes its address in the registry (remote.py reads it for the producers);
a datagram on it makes the supervisor look for jobs now instead of at its next poll.

A datagram is the doorbell's: "<queue> <count>", parsed as strictly, nothing
secret in it, and read at most RINGS_PER_DRAIN at a time. Anyone who can reach the
port can send one, so a ring is only a hint: it moves the supervisor's next look
(one ready-count statement) sooner, and the looks rings cause are paced by a
token bucket (LookPacer): a flood costs at most LOOKS_PER_SECOND statements a
second, a lost ring costs the wait for the poll.
"""
import ipaddress
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ..addresses import parse_host_port
from ..errors import UserError
from .doorbell import read_rings, ring_datagram

LOOKS_PER_SECOND = 20.0   # looks that rings may add to the poll's, in a second
LOOK_BURST = 5.0          # ... and at once, after a quiet spell


class Address(NamedTuple):
    """A numeric address a supervisor listens on."""
    host: str   # an IP address, v4 or v6 (no brackets)
    port: int

    def text(self) -> str:
        """As published: "10.0.0.5:8188", "[fd00::5]:8188"."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_bind(text: str) -> tuple[str, int]:
    """(host, port) of a wakeup_bind value (HOST:PORT or [IPv6]:PORT, port 0 for any free
    one); a one-line UserError naming the problem otherwise."""
    return parse_host_port(text, "wakeup_bind", "10.0.0.5:8188", port_zero=True)


def parse_published(text: str) -> Address | None:
    """The Address of a registry row's wakeup_address; None for anything but a numeric
    address and a port 1-65535 (a row is not trusted more than a datagram)."""
    try:
        parts = urlsplit("//" + text)
        host, port = parts.hostname, parts.port
        if host is None or not port or parts.path or parts.username:
            return None
        return Address(str(ipaddress.ip_address(host)), port)
    except ValueError:
        return None


class LookPacer:
    """When a ring may make the supervisor look: at once while it has tokens (LOOK_BURST,
    refilled at LOOKS_PER_SECOND), else when its next token comes. A ring that comes
    while a look is already due as soon costs nothing."""

    def __init__(self, rate: float = LOOKS_PER_SECOND, burst: float = LOOK_BURST) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.updated: float | None = None   # time.monotonic() of the last refill

    def look_at(self, now: float, next_look_at: float) -> float:
        """The time of the next look, given a ring at `now` and the look already due
        at next_look_at (the poll's); a token is taken only when this moves it sooner."""
        if self.updated is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        at = now if self.tokens >= 1 else now + (1 - self.tokens) / self.rate
        if at >= next_look_at:
            return next_look_at
        self.tokens -= 1   # below zero when taken ahead: later rings wait the longer
        return at


class WakeupPort:
    """The supervisor's UDP end: bound to wakeup_bind, non-blocking, and the pacer of
    the looks its rings cause."""

    def __init__(self, bind: str) -> None:
        host, port = parse_bind(bind)
        family, address = _resolve(bind, host, port)
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            self.sock.bind(address)
        except OSError as exc:
            self.sock.close()
            raise UserError(f"wakeup_bind {bind}: cannot listen there "
                            f"({exc.strerror or type(exc).__name__})") from None
        self.sock.setblocking(False)
        bound_host, bound_port = self.sock.getsockname()[:2]
        self.address = Address(str(ipaddress.ip_address(bound_host)), bound_port)
        self.pacer = LookPacer()

    def fileno(self) -> int:
        return self.sock.fileno()

    def look_at(self, queues: Sequence[str], now: float, next_look_at: float,
                anyone_waiting: bool) -> float:
        """Read the rings waiting (a bounded number); the time of the next look: sooner
        than next_look_at when one of them names one of `queues` and a worker waits
        for work, as the pacer allows."""
        rung = read_rings(self.sock)
        if anyone_waiting and any(queue in rung for queue in queues):
            return self.pacer.look_at(now, next_look_at)
        return next_look_at

    def close(self) -> None:
        self.sock.close()


def open_port(bind: str) -> WakeupPort | None:
    """The supervisor's wake-up port; None when wakeup_bind is empty (off). A one-line
    UserError when the value is wrong or nothing can listen there."""
    return WakeupPort(bind) if bind.strip() else None


def _resolve(bind: str, host: str, port: int) -> tuple[int, tuple[Any, ...]]:
    """(family, socket address) of HOST:PORT: an IP address, or a name resolved once,
    now. The wildcard is refused: producers need the address that reaches us."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise UserError(f"wakeup_bind {bind}: cannot resolve {host!r} ({exc.strerror})") \
            from None
    family, _, _, _, address = found[0]
    if ipaddress.ip_address(str(address[0])).is_unspecified:
        raise UserError(f"wakeup_bind {bind}: name the address other hosts reach this one "
                        "at (a private interface's), not every interface")
    return family, address


def ring(rings: Iterable[tuple[Address, Mapping[str, int]]]) -> None:
    """Send each address one datagram per queue of its {queue: jobs}; best effort, never
    raises (a peer that is not reached finds the jobs by its poll)."""
    sockets: dict[int, socket.socket] = {}
    try:
        for address, counts in rings:
            family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
            try:
                sock = sockets.get(family) or sockets.setdefault(family, _sender(family))
                for queue, jobs in counts.items():
                    sock.sendto(ring_datagram(queue, jobs), (address.host, address.port))
            except OSError:
                pass   # no route, a full buffer, no IPv6 here: the peer's poll finds the job
    finally:
        for sock in sockets.values():
            sock.close()


def _sender(family: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setblocking(False)
    return sock
