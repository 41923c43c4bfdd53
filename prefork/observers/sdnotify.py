"""systemd's notify protocol (Type=notify): READY, STATUS, STOPPING and WATCHDOG
pings, as datagrams to $NOTIFY_SOCKET. Nothing happens outside systemd."""
import math
import os
import socket
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from . import SupervisorView


class SystemdNotifier:
    """A supervisor observer: tells systemd when we are up, what we do, and that we live."""

    def __init__(self, address: str, watchdog_usec: Optional[str] = None) -> None:
        # A leading "@" is Linux's abstract socket namespace.
        self.address = "\0" + address[1:] if address.startswith("@") else address
        # Ping at half the watchdog period, as sd_watchdog_enabled(3) advises.
        self.watchdog_every = int(watchdog_usec) / 2e6 if watchdog_usec else None
        self.next_ping = 0.0
        self.last_status: Optional[str] = None

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None
                         ) -> Optional["SystemdNotifier"]:
        environ = os.environ if environ is None else environ
        address = environ.get("NOTIFY_SOCKET")
        if not address:
            return None
        watchdog = environ.get("WATCHDOG_USEC")
        if watchdog and environ.get("WATCHDOG_PID") not in (None, str(os.getpid())):
            watchdog = None   # the watchdog is meant for another process
        return cls(address, watchdog)

    def send(self, text: str) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto(text.encode("utf-8"), self.address)
            except OSError:
                pass  # systemd went away: nothing we can do about it

    def notify(self, name: str, fields: Mapping[str, Any]) -> None:
        if name == "started":
            self.send(f"READY=1\nMAINPID={os.getpid()}")
        elif name == "stopping":
            self.send("STOPPING=1")
        elif name == "reloaded":
            self.send("READY=1")

    def next_deadline(self) -> float:
        """The loop must wake for the next watchdog ping, however short WatchdogSec is."""
        return self.next_ping if self.watchdog_every else math.inf

    def tick(self, now: float, view: "SupervisorView") -> None:
        status = view.title
        if status and status != self.last_status:
            self.last_status = status
            self.send(f"STATUS={status}")
        if self.watchdog_every and now >= self.next_ping:
            self.next_ping = now + self.watchdog_every
            self.send("WATCHDOG=1")
