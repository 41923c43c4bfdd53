"""Same-host wake-ups: whoever enqueues rings, the supervisors listening wake an idle
child at once instead of waiting for their next poll.

A ring is a best-effort hint (a Unix datagram naming the queue and how many
jobs): losing one costs at most a poll interval, and a ring for a job that is
not committed yet only makes a child look and find nothing. Supervisors on
other hosts are rung over UDP when they publish an address (udp.py), else find
the job by polling. The bells of one database live in one
private directory keyed by what the store names its database
(`Store.bell_key`); two databases of the same name only cost a spurious look.

The directories sit under a folder every local user can write to (the temp
folder), so each level of ours is checked before it is used, as ssh-agent checks
its socket's: a directory, not a link, owned by us, no access for group or other.
Anyone of our uid may send a datagram, so a datagram is parsed strictly and one
that is not exactly "<queue> <count>" is ignored.

A producer rings at every enqueue, so it keeps what it can between rings: one
socket to send with, and the bells it listed in a directory it checked, for as
long as one lstat() says that directory is as it was (_bells()).
"""
import functools
import hashlib
import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import NamedTuple

from ..jobs import QUEUE_PATTERN

MAX_DATAGRAM = 512
MAX_RING_COUNT = 10_000        # jobs one ring may announce: more wakes nobody more
RINGS_PER_DRAIN = 256          # datagrams read per call: a flood cannot hold the loop
MAX_COUNT_DIGITS = len(str(MAX_RING_COUNT))
PRIVATE_MODE = 0o700
# A producer checks and lists a bell directory again when its times moved, and at
# least this often whatever they say (a clock set back could hide a change).
RELIST_SECONDS = 1.0
# ... and trusts those times only once the directory has been left alone this long
# before a listing: a bell made at once after the listing may be stamped with the
# same time (a coarse clock, one-second stamps on some file systems).
QUIET_NS = 2_000_000_000


class BellUnavailable(Exception):
    """The doorbell cannot be used: its directory is unsafe (someone else's, open to
    others, a link, not a directory) or unusable. `path` and `problem` say which."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def bell_directory(key: str) -> str:
    return _bell_directory(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(),
                           os.getuid(), key)


@functools.lru_cache(maxsize=64)
def _bell_directory(base: str, uid: int, key: str) -> str:
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return os.path.join(base, f"prefork-queue-{uid}", digest)


def private_directory(key: str, create: bool) -> str:
    """The bell directory of `key`, each level of ours checked (see the module's doc).
    create: make a missing level (0700) and take away group and other read access
    from one of ours that has it (left 0755 by older versions); without it, a missing
    level raises FileNotFoundError. BellUnavailable when a level is unsafe."""
    return _checked_directory(key, create)[0]


def _checked_directory(key: str, create: bool) -> tuple[str, os.stat_result]:
    """private_directory()'s work: the leaf, and what lstat() said of it."""
    leaf = bell_directory(key)
    top = os.path.dirname(leaf)
    for path in (top, leaf):
        if create:
            try:
                os.mkdir(path, PRIVATE_MODE)
            except FileExistsError:
                pass   # ours from an earlier run, or someone else's: the check tells
        info = _check_private(path, tighten=create)
    return leaf, info


def _check_private(path: str, tighten: bool) -> os.stat_result:
    info = os.lstat(path)   # never follows a link: the link itself is refused
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        raise BellUnavailable(path, "is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise BellUnavailable(path, "is not a directory")
    if info.st_uid != os.getuid():
        raise BellUnavailable(path, f"is owned by uid {info.st_uid}, not by us ({os.getuid()})")
    if mode & 0o022:
        raise BellUnavailable(path, f"has mode {mode:04o}: others may write in it")
    if mode & 0o077:
        if not tighten:
            raise BellUnavailable(path, f"has mode {mode:04o}, not {PRIVATE_MODE:04o}")
        _tighten(path, info)
    return info


def _tighten(path: str, seen: os.stat_result) -> None:
    """chmod 0700 the directory lstat saw, through a descriptor that cannot be a link."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            raise BellUnavailable(path, "was replaced while being checked")
        os.fchmod(fd, PRIVATE_MODE)
    finally:
        os.close(fd)


def parse_ring(data: bytes) -> tuple[str, int] | None:
    """(queue, jobs) of a datagram "<queue> <count>" (ASCII digits, the count capped at
    MAX_RING_COUNT); None for anything else, whatever the bytes."""
    if not data.isascii():
        return None
    queue, space, count = data.decode("ascii").partition(" ")
    if not (space and QUEUE_PATTERN.fullmatch(queue) and count.isdigit()):
        return None   # isdigit() on ASCII: 0-9 only (no "²", which int() refuses)
    if len(count.lstrip("0")) > MAX_COUNT_DIGITS:
        return queue, MAX_RING_COUNT   # capped without converting a long number
    return queue, min(int(count), MAX_RING_COUNT)


def ring_datagram(queue: str, jobs: int) -> bytes:
    """The datagram of a ring, as parse_ring() reads it."""
    return f"{queue} {jobs}".encode("utf-8")


def read_rings(sock: socket.socket) -> dict[str, int]:
    """{queue: jobs} rung on a non-blocking datagram socket since the last call (up to
    RINGS_PER_DRAIN datagrams; the rest wait for the next call). A malformed
    datagram is ignored, never raised; so is an error the socket reports (a port
    unreachable answer to a datagram it sent)."""
    rung: dict[str, int] = {}
    for _ in range(RINGS_PER_DRAIN):
        try:
            data = sock.recv(MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            continue
        parsed = parse_ring(data)
        if parsed:
            queue, jobs = parsed
            rung[queue] = min(rung.get(queue, 0) + jobs, MAX_RING_COUNT)
    return rung


class Doorbell:
    """The supervisor's end: a datagram socket named after its pid, in a checked
    private directory (BellUnavailable when it cannot have one)."""

    def __init__(self, key: str) -> None:
        try:
            directory = private_directory(key, create=True)
        except OSError as exc:
            raise BellUnavailable(exc.filename or bell_directory(key),
                                  exc.strerror or type(exc).__name__) from exc
        self.path = os.path.join(directory, f"{os.getpid()}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            if os.path.lexists(self.path):
                os.unlink(self.path)  # left by a process that had our pid before
            self.sock.bind(self.path)
        except OSError as exc:
            self.sock.close()
            raise BellUnavailable(self.path, exc.strerror or type(exc).__name__) from exc
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def rings(self) -> dict[str, int]:
        """{queue: jobs} rung since the last call (see read_rings)."""
        return read_rings(self.sock)

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def ring(key: str, counts: Mapping[str, int]) -> None:
    """Tell this host's supervisors that jobs were enqueued: counts is {queue: jobs}.
    Rings nobody when the bell directory is missing or fails the check: a ring names
    queues, and must not reach whoever else made that directory."""
    try:
        bells = _bells(key)
    except (OSError, BellUnavailable):
        return  # nobody listens on this host, or nobody we trust
    if not bells:
        return
    sock = _sender()
    for bell in bells:
        for queue, jobs in counts.items():
            try:
                sock.sendto(ring_datagram(queue, jobs), bell)
            except OSError:
                pass  # a stale bell or a full queue: polling covers it


class _Listing(NamedTuple):
    """The bells of a checked directory as a producer last listed them."""
    watched: str             # the directory, or the level above that lacks it (none then)
    seen: tuple[int, ...]    # what lstat() said of `watched` then (_seen())
    until: float             # time.monotonic() from which it is checked and listed again
    bells: tuple[str, ...]   # the paths of its sockets


_listings: dict[str, _Listing] = {}   # bell directory -> its last listing
_sending: list[socket.socket] = []    # this process's socket that rings, once made
_sending_lock = threading.Lock()


def _bells(key: str) -> tuple[str, ...]:
    """The sockets in the bell directory of `key`, as last checked and listed while
    lstat() says the same of what was watched and the listing is recent and trusted
    (RELIST_SECONDS, QUIET_NS); checked (both levels) and listed now otherwise.

    One lstat() of the leaf stands for the check of both levels: the same inode,
    owner, mode and change time is the directory we checked, still in our top level
    (a directory has one parent, and only we may move what our 0700 level holds);
    a bell made or removed in it moves its change and modification times. Where
    the directory is missing (no supervisor on this host), the level above it is
    watched: making the directory moves that one's times."""
    directory = bell_directory(key)
    listed = _listings.get(directory)
    now = time.monotonic()
    if listed is not None and now < listed.until and _seen(listed.watched) == listed.seen:
        return listed.bells
    bells: tuple[str, ...] = ()
    try:
        watched, info = _checked_directory(key, create=False)
        bells = tuple(os.path.join(watched, name) for name in os.listdir(watched)
                      if name.endswith(".sock"))
    except FileNotFoundError as exc:
        watched = os.path.dirname(exc.filename or directory)
        info = os.lstat(watched)
    quiet = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > QUIET_NS
    _listings[directory] = _Listing(watched, _info_seen(info),
                                    now + RELIST_SECONDS if quiet else now, bells)
    return bells


def _seen(path: str) -> tuple[int, ...]:
    return _info_seen(os.lstat(path))


def _info_seen(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_uid, info.st_mode, info.st_mtime_ns,
            info.st_ctime_ns)


def _sender() -> socket.socket:
    """The datagram socket this process rings with, made at its first ring."""
    if not _sending:
        with _sending_lock:
            if not _sending:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.setblocking(False)
                _sending.append(sock)
    return _sending[0]


def _forget_sender() -> None:
    """In a new child: the parent's socket is left to the parent (a lock another
    thread held at the fork with it)."""
    global _sending_lock
    _sending_lock = threading.Lock()
    for sock in _sending:
        sock.close()
    _sending.clear()


os.register_at_fork(after_in_child=_forget_sender)
