"""Same-host wake-ups: whoever enqueues rings, the supervisors listening wake an idle
child at once instead of waiting for their next poll.

A ring is a best-effort hint (a Unix datagram naming the queue and how many
jobs): losing one costs at most a poll interval, and a ring for a job that is
not committed yet only makes a child look and find nothing. Supervisors on
other hosts find the job by polling. The bells of one database live in one
private directory (mode 0700) keyed by what the store names its database
(`Store.bell_key`); two databases of the same name only cost a spurious look.
"""
import hashlib
import os
import socket
import tempfile
from collections.abc import Mapping

MAX_DATAGRAM = 512


def bell_directory(key: str) -> str:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return os.path.join(base, f"prefork-queue-{os.getuid()}", digest)


class Doorbell:
    """The supervisor's end: a datagram socket named after its pid."""

    def __init__(self, key: str) -> None:
        directory = bell_directory(key)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.path = os.path.join(directory, f"{os.getpid()}.sock")
        if os.path.exists(self.path):
            os.unlink(self.path)  # left by a process that had our pid before
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def rings(self) -> dict[str, int]:
        """{queue: jobs} rung since the last call."""
        rung: dict[str, int] = {}
        while True:
            try:
                data = self.sock.recv(MAX_DATAGRAM)
            except BlockingIOError:
                return rung
            queue, _, count = data.decode("utf-8", "replace").partition(" ")
            rung[queue] = rung.get(queue, 0) + (int(count) if count.isdigit() else 1)

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def ring(key: str, counts: Mapping[str, int]) -> None:
    """Tell this host's supervisors that jobs were enqueued: counts is {queue: jobs}."""
    directory = bell_directory(key)
    try:
        names = [name for name in os.listdir(directory) if name.endswith(".sock")]
    except OSError:
        return  # nobody listens on this host
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for name in names:
            for queue, jobs in counts.items():
                try:
                    sock.sendto(f"{queue} {jobs}".encode("utf-8"), os.path.join(directory, name))
                except OSError:
                    pass  # a stale bell or a full queue: polling covers it
