"""The supervisor's ears: what wakes it from outside before its next poll. The
same-host doorbell (doorbell.py, unless `doorbell = false`) names how many jobs
came, and idle children are woken for them at once; the UDP port (udp.py, when
`wakeup_bind` is set) makes the supervisor look sooner, as its pacer allows."""
from collections.abc import Collection, Sequence

from ..logs import event
from . import doorbell, udp


class Listeners:
    def __init__(self) -> None:
        self.bell: doorbell.Doorbell | None = None   # none: off, or its directory is unsafe
        self.port: udp.WakeupPort | None = None      # none: wakeup_bind is empty

    def open_port(self, bind: str) -> str:
        """Listen on wakeup_bind (a one-line UserError when one cannot); the address to
        publish in the registry ("" when off)."""
        self.port = udp.open_port(bind)
        return self.port.address.text() if self.port else ""

    def open_bell(self, key: str | None, enabled: bool) -> None:
        """The same-host doorbell when enabled; none when its directory is unsafe or
        unusable (the supervisor then finds jobs by polling, and the port)."""
        if not (enabled and key):
            return
        try:
            self.bell = doorbell.Doorbell(key)
        except doorbell.BellUnavailable as exc:
            event("doorbell_unavailable", path=exc.path, problem=exc.problem)

    def fds(self) -> list[int]:
        return [ear.fileno() for ear in (self.bell, self.port) if ear is not None]

    def heard(self, ready: Collection[int], queues: Sequence[str], now: float,
              next_look_at: float, anyone_waiting: bool) -> tuple[int, float]:
        """After select(): (children to wake now for the doorbell's rings, the time of the
        next look, sooner when the port was rung for one of `queues`)."""
        wake = 0
        if self.bell and self.bell.fileno() in ready:
            rung = self.bell.rings()
            wake = sum(rung.get(queue, 0) for queue in queues)
        if self.port and self.port.fileno() in ready:
            next_look_at = self.port.look_at(queues, now, next_look_at, anyone_waiting)
        return wake, next_look_at

    def forget(self) -> None:
        """In a new child: close our copies; the bell's file stays, it is the parent's."""
        for ear in (self.bell, self.port):
            if ear is not None:
                ear.sock.close()

    def close(self) -> None:
        for ear in (self.bell, self.port):
            if ear is not None:
                ear.close()
