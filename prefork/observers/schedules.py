"""The supervisor's observer of recurring jobs (prefork/schedules.py reads them from
the config file): it enqueues each schedule's due ticks through the supervisor's
connection.

Every supervisor enqueues every tick, with the idempotency key
"schedule:NAME:2026-01-05T03:00:00Z": the store returns the existing job for
a repeated key, so any number of supervisors on any number of hosts enqueue a
tick exactly once.

A tick is enqueued from its time until the next tick is due, plus SLACK (a
late pass of the loop loses nothing): while the database is away it is tried
again on each pass in that window. A tick nobody enqueued in its window
(supervisor down, database away) is missed and logged (schedule_ticks_missed);
it is never back-filled, except with catch_up = latest, which at start (and
for a schedule added at reload) enqueues the most recent tick at or before
now, at once, even if it is older. That one is a no-op when the tick had been
enqueued before (same key) and, on a first start ever, runs the latest tick.
"""
import logging
import math
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Optional, Union

from ..errors import UserError
from ..jobs import NewJob
from ..logs import event
from ..schedules import Schedule, iso, load

if TYPE_CHECKING:
    from . import SupervisorView

SLACK = timedelta(seconds=2)          # a tick stays due this long after the next one
RETRY_INTERVAL = 1.0                  # seconds between tries while the database is away
JUST_BEFORE = timedelta(microseconds=1)


def due_ticks(schedule: Schedule, done_until: datetime, now: datetime,
              catch_up_tick: Optional[datetime] = None
              ) -> tuple[Optional[datetime], list[datetime]]:
    """(first missed tick or None, ticks to enqueue now, oldest first).

    Ticks after done_until and at or before now are due while their window is
    open (until the next tick + SLACK), and catch_up_tick whatever its age.
    The others were missed.
    """
    first = schedule.next_after(done_until)
    if first > now:
        return None, []
    ticks = []
    if catch_up_tick is not None and catch_up_tick >= first:
        ticks.append(catch_up_tick)
        first = schedule.next_after(catch_up_tick)
    oldest = schedule.latest(now - SLACK)
    tick = max(first, oldest)
    while tick <= now:
        ticks.append(tick)
        tick = schedule.next_after(tick)
    return (first if first < oldest else None), ticks


# -- the supervisor's observer -------------------------------------------------------

class ScheduleState:
    """One schedule in a running supervisor: the ticks up to done_until are handled."""

    def __init__(self, schedule: Schedule, now: datetime) -> None:
        self.schedule = schedule
        latest = schedule.latest(now)
        self.catch_up_tick = latest if schedule.catch_up == "latest" else None
        self.set_done_until(latest - JUST_BEFORE if self.catch_up_tick else latest)
        event("schedule_armed", schedule=schedule.name, type=schedule.job.type,
              timezone=str(schedule.zone),
              next_tick=iso(schedule.next_after(now)),
              catch_up_tick=self.catch_up_tick and iso(self.catch_up_tick))

    def set_done_until(self, moment: datetime) -> None:
        self.done_until = moment
        self.next_due = self.schedule.next_after(moment)

    def run(self, now: datetime, enqueue: Callable[[NewJob], Union[int, Literal[False]]]) -> bool:
        """Enqueue the due ticks; False when the database did not take one."""
        if self.next_due > now:
            return True
        missed, ticks = due_ticks(self.schedule, self.done_until, now, self.catch_up_tick)
        for tick in ticks:
            if missed is not None and tick > missed:
                event("schedule_ticks_missed", level=logging.WARNING,
                      schedule=self.schedule.name, first=iso(missed), before=iso(tick))
                self.set_done_until(tick - JUST_BEFORE)
                missed = None
            job_id = enqueue(self.schedule.job_for(tick))
            if job_id is False:      # the database is away: tried again in a moment
                return False
            self.catch_up_tick = None
            self.set_done_until(tick)
            event("schedule_enqueued", schedule=self.schedule.name, tick=iso(tick),
                  job_id=job_id)
        return True


class Scheduler:
    """Supervisor observer: enqueues the due ticks of every schedule, on each pass
    of the main loop, through the supervisor's own database connection."""

    def __init__(self, schedules: Mapping[str, Schedule],
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.active = True
        self.states: dict[str, ScheduleState] = {}
        self.retry_at = 0.0           # monotonic; set while the database is away
        self._arm(schedules)

    @classmethod
    def from_config(cls, config: Any) -> "Scheduler":
        return cls(load(config))

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), timezone.utc)

    def _arm(self, schedules: Mapping[str, Schedule]) -> None:
        """Keep the state of unchanged schedules; new or changed ones start afresh."""
        now = self.now()
        self.states = {name: (self.states[name] if name in self.states
                              and self.states[name].schedule == schedule
                              else ScheduleState(schedule, now))
                       for name, schedule in schedules.items()}

    def notify(self, name: str, fields: Mapping[str, Any]) -> None:
        if name == "reloaded":
            try:
                self._arm(load(fields["config"]))
            except UserError as exc:   # validate() passed it; keep the old schedules
                event("schedules_reload_failed", level=logging.ERROR, error=str(exc))
        elif name == "stopping":
            self.active = False

    def next_deadline(self) -> float:
        """The monotonic time the next tick is due (the loop wakes for it)."""
        if not self.active or not self.states:
            return math.inf
        due = min(state.next_due for state in self.states.values())
        wait = max(0.0, (due - self.now()).total_seconds())
        return max(time.monotonic() + wait, self.retry_at)

    def tick(self, now: float, view: "SupervisorView") -> None:
        if not self.active or now < self.retry_at:
            return
        moment = self.now()
        for state in self.states.values():
            if not state.run(moment, view.enqueue):
                self.retry_at = now + RETRY_INTERVAL
                return
