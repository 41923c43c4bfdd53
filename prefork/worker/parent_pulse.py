"""The supervisor's signs of life as its children see them, and a child's watchdog.

Other supervisors take a supervisor for gone when its heartbeat is older than
supervisor_timeout (they prune it and hand its jobs out again), and anyone takes a
job back once its lease runs out. A parent frozen (SIGSTOP), stuck, or whose
heartbeat or lease extension keeps failing looks exactly like that, while its
children may still run their jobs: the same job would run twice at once. So the
parent records, in memory it shares with its children (an anonymous shared mapping
made before the forks), when its heartbeat and its lease extension last succeeded
(monotonic times, which every process of the host reads alike, each taken before
its statement: never later than the database saw it). A watchdog thread in each
child reads them. Past a margin before the prune or the lease expiry could come,
a child that runs or holds a job stops the way a quick stop does (QuickStop,
raised by the child's own SIGQUIT handler in its main thread): the job is given
back, its attempt restored, and the child exits. While the silence lasts no child
claims a job, and the parent hands none at a fork. The parent alone acts on
process signals; the thread only signals its own main thread.
"""
import _thread
import mmap
import os
import signal
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..events import Event
from ..logs import event

_STAMP = struct.Struct("d")
_BEAT, _EXTENDED = 0, _STAMP.size   # offsets of the two stamps in the shared mapping
_BOTH = struct.Struct("dd")
LONGEST_LOOK = 1.0   # seconds between a watchdog's looks, at most
MIN_GRACE = 0.1      # seconds an interrupted handler has to end, at least


class ParentPulse:
    """Written by the parent, read by its children: its last successful heartbeat and
    lease extension. Each stamp is one aligned 8-byte write; a reader reads until two
    reads agree, so that it never acts on a torn value."""

    def __init__(self) -> None:
        self.shared = mmap.mmap(-1, _BOTH.size)   # MAP_SHARED: the children see it
        now = time.monotonic()
        self.beat(now)
        self.extended(now)

    def beat(self, at: float) -> None:
        """A heartbeat begun at `at` (monotonic) succeeded."""
        _STAMP.pack_into(self.shared, _BEAT, at)

    def extended(self, at: float) -> None:
        """The leases that needed it were extended by a pass begun at `at`."""
        _STAMP.pack_into(self.shared, _EXTENDED, at)

    def stamps(self) -> tuple[float, float]:
        """(last heartbeat, last extension), monotonic."""
        while True:
            first = bytes(self.shared)
            if bytes(self.shared) == first:
                beat, extended = _BOTH.unpack(first)
                return beat, extended

    def silent(self, config: Any) -> Optional[str]:
        """The parent's own look: the silence its children (of this config) act on now."""
        return self.silence(time.monotonic(), SilenceLimits.of(config))

    def silence(self, now: float, limits: "SilenceLimits") -> Optional[str]:
        """Why a child must give its job up now, or None."""
        beat, extended = self.stamps()
        if now - beat > limits.beat:
            return f"no heartbeat for {now - beat:.1f}s"
        if now - extended > limits.lease:
            return f"no lease extension for {now - extended:.1f}s"
        return None


@dataclass(frozen=True)
class SilenceLimits:
    """How long a child lets its parent be silent, from the parent's settings."""
    beat: float    # seconds since the last heartbeat
    lease: float   # seconds since the last pass of lease extension
    grace: float   # seconds an interrupted handler has to end before its child exits

    @classmethod
    def of(cls, config: Any) -> "SilenceLimits":
        """A heartbeat is due every heartbeat_interval and a prune may come at
        supervisor_timeout: give up halfway between the two (at least half an interval
        late: a heartbeat as slow as the timeout leaves no room). Leases are extended
        every third of lease_seconds and none ends before two thirds of it after a
        pass: give up at half. The grace is a quarter of what is left before the nearer
        end, so that a stubborn handler's child is gone well before it."""
        interval, timeout = config.heartbeat_interval, config.supervisor_timeout
        beat = max((interval + timeout) / 2, interval * 1.5)
        lease = config.lease_seconds / 2
        return cls(beat, lease, max(MIN_GRACE, min(timeout - beat, lease / 3) / 4))


class Watchdog:
    """A child's view of its parent's pulse. While the parent is silent the worker
    claims nothing (may_claim); a child that runs or holds a job when the silence
    begins gives it up (start)."""

    def __init__(self, pulse: ParentPulse, config: Any) -> None:
        self.pulse = pulse
        self.limits = SilenceLimits.of(config)

    def silence(self) -> Optional[str]:
        return self.pulse.silence(time.monotonic(), self.limits)

    def may_claim(self) -> bool:
        return self.silence() is None

    def start(self, holding: Callable[[], bool], running: Callable[[], Optional[int]],
              stuck_exit: int) -> None:
        """Watch from a thread. Once the parent is silent while holding() (a job runs or
        waits in the batch), log why and which job it gives up (running(): the one
        whose handler runs, if any) and send SIGQUIT to our main thread, whose
        handler stops the worker quickly. A handler still running halfway through the
        grace gets a second one (a command job's program is then killed at once); one
        still running at its end (it swallowed QuickStop, or is stuck in C code) ends
        the child: os._exit(stuck_exit). The thread blocks every signal, so that a
        signal for the process always reaches the main thread (where Python runs
        handlers, and where a blocking call must be interrupted)."""
        grace = self.limits.grace
        look = min(LONGEST_LOOK, grace / 2)
        main = threading.main_thread().ident
        assert main is not None

        def run() -> None:
            while (reason := self.silence()) is None or not holding():
                time.sleep(look)
            event(Event.WORKER_PARENT_SILENT, reason=reason, job_id=running())
            for _ in range(2):
                signal.pthread_kill(main, signal.SIGQUIT)
                time.sleep(grace / 2)
                if running() is None:
                    return
            event(Event.WORKER_PARENT_SILENT, job_id=running(),
                  reason=f"its handler did not stop within {grace:g}s: the worker exits")
            os._exit(stuck_exit)

        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            # A bare thread (as TitleTicker's): nobody joins it, the child ends with os._exit.
            _thread.start_new_thread(run, ())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
