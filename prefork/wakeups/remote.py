"""The producers' side of cross-host wake-ups: whom to ring. The registry's running
supervisors that publish a wake-up address (udp.py) are read at most once every
CACHE_SECONDS per database and process, and only by a process that rings (one
that enqueues): never a query per enqueue, and none for a process that never
enqueues. A supervisor that starts is rung once the cache is renewed (its poll
finds the jobs meanwhile); one that stopped is no longer rung once it is.

Whoever can write the registry (prefork_processes) chooses the addresses: a row is
trusted no more than a datagram. So a read takes at most MAX_PEER_ROWS rows (the
freshest heartbeats) and MAX_QUEUES_TEXT characters of each queue list, rows that
publish one address make one peer, and a ring reaches at most MAX_RING_ADDRESSES
addresses (with one datagram per queue each), however many rows there are.
"""
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..settings import MAX_QUEUES
from . import udp

CACHE_SECONDS = 5.0
MAX_PEER_ROWS = 256        # registry rows a read takes
MAX_RING_ADDRESSES = 32    # addresses a ring sends to; the others find the jobs by their poll
MAX_QUEUES_TEXT = MAX_QUEUES * 65   # the longest queue list a config allows, joined by ","
# The parameters of the stores' WAKEUP_PEERS, in its order.
PEER_READ_BOUNDS = (MAX_QUEUES_TEXT, MAX_PEER_ROWS)

# The registry's rows as a store reads them: (wakeup_address, queues joined by ",").
PeerRows = Sequence[Sequence[Any]]
# Reads them; None when it may not now (an application's connection in a transaction).
PeerReader = Callable[[], PeerRows | None]


class Peer(NamedTuple):
    """A running supervisor that listens for wake-ups, and the queues it works."""
    address: udp.Address
    queues: frozenset[str]


_cache: dict[str, tuple[float, tuple[Peer, ...]]] = {}   # bell key -> (expiry, peers)
_lock = threading.Lock()


def peers(key: str, read: PeerReader) -> tuple[Peer, ...]:
    """The peers of the database `key` names, read through `read` when the cache of them
    is older than CACHE_SECONDS. A read that fails counts as none found (until the
    next renewal): a ring runs after its jobs committed and must never fail them."""
    now = time.monotonic()
    with _lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    try:
        rows = read()
    except Exception:   # any driver's: the schema lacks 0007, the connection broke, ...
        rows = ()
    if rows is None:   # not read now: whatever was known, else nobody
        return cached[1] if cached is not None else ()
    found = tuple(_peers_of(rows))
    with _lock:
        _cache[key] = (now + CACHE_SECONDS, found)
    return found


def ring(found: Iterable[Peer], counts: Mapping[str, int]) -> None:
    """Ring each peer for the queues of `counts` ({queue: jobs}) it works, the first
    MAX_RING_ADDRESSES of them."""
    rings = [(peer.address, mine) for peer in found
             if (mine := {queue: jobs for queue, jobs in counts.items() if queue in peer.queues})]
    if rings:
        udp.ring(rings[:MAX_RING_ADDRESSES])


def _peers_of(rows: PeerRows) -> Iterable[Peer]:
    """One peer per address, freshest row first, with the queues of all its rows."""
    found: dict[udp.Address, set[str]] = {}
    for address_text, queues_text in rows:
        address = udp.parse_published(str(address_text or ""))
        if address is not None:
            found.setdefault(address, set()).update(str(queues_text or "").split(","))
    return (Peer(address, frozenset(queues)) for address, queues in found.items())
