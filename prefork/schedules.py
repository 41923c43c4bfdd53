"""Recurring jobs: the [schedule:NAME] sections of the config file, read into Schedules,
and each schedule's ticks. The supervisor's observer enqueues them
(observers/schedules.py); the dashboard lists them.

    [schedule:nightly-report]
    type = report.build
    cron = 0 3 * * *
    payload = {"format": "pdf"}
    queue = reports
    catch_up = none
    timezone = Europe/Zagreb

`type` needs a handler (--app or a [command:...] section); exactly one of
`cron` (5 fields) or `every` (seconds); catch_up is none or latest. KEY_DOCS
lists every key; the example config is made from it (example()).

A cron's fields are wall-clock times in its `timezone` (UTC by default; an
IANA name). Each matching wall-clock time is one tick, at one instant: a time
that occurs twice (the hour repeated when the clocks go back) runs at its
first occurrence only; a time that does not occur (the hour skipped when they
go forward) runs at the instant the clocks skipped to, and several skipped
times of one schedule are that one tick. croniter is given naive wall times
only, so this holds whatever it does with aware ones (7.0 runs a repeated
time twice). `every` counts seconds and ignores time zones. Tick times come
from the wall clock in UTC and are aligned (every = N: multiples of N seconds
since the epoch), so every host computes the same ones, whenever it started.
"""
import dataclasses
import json
import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Collection, Mapping, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from .errors import RejectedJob, UserError
from .jobs import NewJob, new_job
from .worker import commands

# Every key of a [schedule:NAME] section: (key, example value, meaning). The parser
# takes these keys and no other, and the example config shows them all.
KEY_DOCS = (
    ("type", "report.build", "The job type to enqueue: an --app handler or a [command:TYPE] "
     "section. Required."),
    ("cron", "0 3 * * *", "minute hour day-of-month month day-of-week, in `timezone`. "
     "Give cron or every, not both."),
    ("every", "300", "Or: a tick every N seconds, aligned to multiples of N since the epoch."),
    ("timezone", "Europe/Zagreb", "IANA zone of the cron fields (default UTC). A time the "
     "clocks skip runs once, when they skip; a repeated time runs once, the first time."),
    ("payload", '{"format": "pdf"}', "The JSON payload of every tick's job (default {})."),
    ("queue", "reports", "The job's queue (default: default)."),
    ("priority", "0", "The job's priority: lower runs first (default 0)."),
    ("max_attempts", "5", "The job's attempts before dead (default: the max_attempts setting)."),
    ("catch_up", "none", "none: a tick missed while no supervisor ran is skipped; latest: "
     "enqueue the most recent one at start."),
)
KEYS = tuple(key for key, _, _ in KEY_DOCS)
CATCH_UP = ("none", "latest")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")   # whole names only: fullmatch
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso(moment: datetime) -> str:
    """A tick time as it appears in keys and logs: 2026-01-05T03:00:00Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass(frozen=True)
class Schedule:
    name: str
    job: NewJob               # the validated job of every tick, without its key
    cron: Optional[str]
    every: Optional[int]      # seconds
    catch_up: str
    zone: tzinfo = timezone.utc   # of the cron fields

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after `moment` (an aware datetime)."""
        if self.every:
            seconds = int((moment - EPOCH) // timedelta(seconds=self.every) + 1) * self.every
            return EPOCH + timedelta(seconds=seconds)
        return self._next_wall_time(moment)[1]

    def latest(self, moment: datetime) -> datetime:
        """The last tick at or before `moment`."""
        if self.every:
            seconds = int((moment - EPOCH) // timedelta(seconds=self.every)) * self.every
            return EPOCH + timedelta(seconds=seconds)
        # Instants grow with wall times: the wall time before the next tick's is the latest.
        following, _ = self._next_wall_time(moment)
        return wall_instant(self._wall_times(following).get_prev(datetime), self.zone)

    def _wall_times(self, wall: datetime) -> croniter:
        """The cron's wall-clock times around naive `wall`: calendar arithmetic only."""
        assert self.cron is not None   # a schedule has either every or cron
        return croniter(self.cron, wall)

    def _next_wall_time(self, moment: datetime) -> tuple[datetime, datetime]:
        """(wall time, instant) of the first tick strictly after `moment`. The wall
        times just after the clock's reading at `moment` may still name instants at or
        before it (a repeated hour, a skipped one): they are passed over."""
        wall_times = self._wall_times(moment.astimezone(self.zone).replace(tzinfo=None))
        while True:
            wall = wall_times.get_next(datetime)
            instant = wall_instant(wall, self.zone)
            if instant > moment:
                return wall, instant

    def key(self, tick: datetime) -> str:
        return f"schedule:{self.name}:{iso(tick)}"

    def job_for(self, tick: datetime) -> NewJob:
        return dataclasses.replace(self.job, key=self.key(tick))


def wall_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant (UTC) that naive wall time `wall` of `zone` names: the first of the
    two in a repeated hour; for a time the clocks skipped, the instant they skipped at."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # Skipped: fold=1 reads the wall time with the offset after the jump, which
    # names an instant before it; fold=0 with the offset before, an instant after.
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(instant.timestamp())
    offset_after = instant.astimezone(zone).utcoffset()
    while after - before > 1:   # the jump is on a whole second
        middle = (before + after) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == offset_after:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, timezone.utc)


# -- loading ---------------------------------------------------------------------

def validate(config: Any) -> None:
    """The start and reload check of the [command:*] and [schedule:*] sections.

    Raises a one-line UserError on the first problem, having changed nothing;
    then registers the command job types as handlers. Called by `run` after
    the application is imported (before any fork) and by the supervisor
    before it applies a reloaded config.
    """
    specs = commands.build(config)
    build(config, commands.handled_types(specs), specs)
    commands.install(specs)


def load(config: Any) -> dict[str, Schedule]:
    """{name: Schedule} for a config whose command types are installed (see validate)."""
    specs = commands.build(config)
    return build(config, commands.handled_types(specs), specs)


def build(config: Any, known_types: Collection[str],
          command_specs: Mapping[str, commands.CommandSpec]) -> dict[str, Schedule]:
    """{name: Schedule} of the config's [schedule:*] sections; UserError on the first problem."""
    schedules = {}
    for name, keys in sorted(config.named("schedule").items()):
        def fail(text: str, name: str = name) -> UserError:
            return commands.section_error(config, "schedule", name, text)
        schedules[name] = _parse(name, keys, config, fail)
        _check_type(schedules[name].job, known_types, command_specs, fail)
    return schedules


def _parse(name: str, keys: Mapping[str, str], config: Any, fail: commands.Fail) -> Schedule:
    if not NAME_PATTERN.fullmatch(name):
        raise fail("invalid schedule name: use 1-128 of A-Z a-z 0-9 _ . -")
    unknown = sorted(set(keys) - set(KEYS))
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(KEYS)})")
    if not keys.get("type"):
        raise fail("type is required: the job type to enqueue")
    cron, every = _parse_timing(keys, fail)
    zone = _parse_zone(keys.get("timezone"), cron, fail)
    catch_up = keys.get("catch_up", "none")
    if catch_up not in CATCH_UP:
        raise fail(f"catch_up must be one of {', '.join(CATCH_UP)}, got {catch_up!r}")
    try:
        job = new_job(keys["type"], keys.get("payload", "{}"),
                      queue=keys.get("queue", "default"),
                      priority=_parse_int(keys, "priority", 0, fail),
                      max_attempts=_parse_int(keys, "max_attempts", config.max_attempts, fail),
                      max_payload_bytes=config.max_payload_bytes)
    except UserError as exc:
        raise fail(str(exc)) from None
    return Schedule(name, job, cron, every, catch_up, zone)


def _parse_timing(keys: Mapping[str, str],
                  fail: commands.Fail) -> tuple[Optional[str], Optional[int]]:
    cron, every = keys.get("cron"), keys.get("every")
    if (cron is None) == (every is None):
        raise fail("give exactly one of cron (5 fields) or every (seconds)")
    if cron is not None:
        if len(cron.split()) != 5 or not croniter.is_valid(cron):
            raise fail(f"invalid cron expression {cron!r}: use 5 fields "
                       f"(minute hour day-of-month month day-of-week)")
        try:
            croniter(cron, datetime.now(timezone.utc)).get_next(datetime)
        except CroniterError:
            raise fail(f"cron expression {cron!r} matches no date") from None
        return " ".join(cron.split()), None
    assert every is not None   # exactly one of the two is given (checked above)
    try:
        seconds = int(every)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise fail(f"every must be a whole number of seconds, at least 1, got {every!r}")
    return None, seconds


def _parse_zone(name: Optional[str], cron: Optional[str], fail: commands.Fail) -> tzinfo:
    if name is None:
        return timezone.utc
    if cron is None:
        raise fail("timezone is for cron: every counts seconds, whatever the zone")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):   # ValueError: not a zone key at all
        raise fail(f"unknown time zone {name!r}: use an IANA name, e.g. Europe/Zagreb") from None


def example() -> str:
    """The commented [schedule:NAME] example of `prefork-queue config --example`."""
    return commands.example_section(
        "schedule:nightly-report", KEY_DOCS,
        "a recurring job (each tick is enqueued once, by any supervisor)")


def _parse_int(keys: Mapping[str, str], key: str, default: int, fail: commands.Fail) -> int:
    if key not in keys:
        return default
    try:
        return int(keys[key])
    except ValueError:
        raise fail(f"{key} must be a whole number, got {keys[key]!r}") from None


def _check_type(job: NewJob, known_types: Collection[str],
                command_specs: Mapping[str, commands.CommandSpec], fail: commands.Fail) -> None:
    if job.type not in known_types:
        raise fail(f"job type {job.type!r} has no handler (--app module or [command:...] section)")
    spec = command_specs.get(job.type)
    if spec is not None:
        try:
            commands.render_argv(spec, json.loads(job.payload_text))
        except RejectedJob as exc:
            raise fail(f"payload does not fit [command:{job.type}]: {exc}") from None
