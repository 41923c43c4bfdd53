"""Recurring jobs ([schedule:NAME] sections): parsing, tick times through the real
croniter, and real supervisors enqueuing ticks into real MariaDB."""
import signal
import time
from datetime import datetime, timedelta, timezone

import pytest
from conftest import run_cli, wait_until
from harness import assert_never_logged, supervisor_starter

from prefork import config as config_module
from prefork.errors import UserError
from prefork.observers.schedules import RETRY_INTERVAL, Scheduler, due_ticks
from prefork.schedules import build, iso

UTC = timezone.utc
SETTINGS = "[prefork-queue]\napp = schedule_app\nworkers = 1\n"
EVERY_SECOND = "[schedule:{name}]\ntype = scheduled_tick\nevery = 1\n"


def at(text):
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def load_schedules(tmp_path, sections, known=("scheduled_tick",)):
    path = tmp_path / "schedules.conf"
    path.write_text(SETTINGS + sections)
    config = config_module.load({}, path=str(path), environ={})
    return build(config, set(known), {})


def one(tmp_path, body, name="s"):
    return load_schedules(tmp_path, f"[schedule:{name}]\n{body}")[name]


# -- parsing -----------------------------------------------------------------------

def test_a_schedule_section_becomes_a_validated_job_template(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\ncron = 0 3 * * 1\n"
                             'payload = {"format": "pdf"}\nqueue = reports\npriority = -5\n'
                             "max_attempts = 2\ncatch_up = latest\n", name="weekly")
    assert (schedule.cron, schedule.every, schedule.catch_up) == ("0 3 * * 1", None, "latest")
    job = schedule.job_for(at("2026-01-05T03:00:00"))
    assert (job.type, job.queue, job.priority, job.max_attempts) == ("scheduled_tick", "reports",
                                                                    -5, 2)
    assert job.payload_text == '{"format":"pdf"}'
    assert job.key == "schedule:weekly:2026-01-05T03:00:00Z"


def test_defaults_queue_priority_attempts_and_no_catch_up(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 60\n")
    assert (schedule.job.queue, schedule.job.priority, schedule.job.max_attempts,
            schedule.catch_up, schedule.job.payload_text) == ("default", 0, 5, "none", "{}")


@pytest.mark.parametrize("body, complaint", [
    ("type = scheduled_tick\nevery = 1\ncolour = red\n", "unknown key 'colour'"),
    ("type = scheduled_tick\n", "exactly one of cron"),
    ("type = scheduled_tick\nevery = 1\ncron = * * * * *\n", "exactly one of cron"),
    ("every = 1\n", "type is required"),
    ("type = nobody_handles_this\nevery = 1\n", "'nobody_handles_this' has no handler"),
    ("type = scheduled_tick\ncron = 61 * * * *\n", "invalid cron expression"),
    ("type = scheduled_tick\ncron = * * * * * *\n", "invalid cron expression"),
    ("type = scheduled_tick\ncron = @daily\n", "invalid cron expression"),
    ("type = scheduled_tick\ncron = 0 3 31 2 *\n", "matches no date"),
    ("type = scheduled_tick\nevery = 0\n", "every must be a whole number"),
    ("type = scheduled_tick\nevery = 1.5\n", "every must be a whole number"),
    ("type = scheduled_tick\nevery = soon\n", "every must be a whole number"),
    ("type = scheduled_tick\nevery = 1\npayload = [1]\n", "payload must be a JSON object"),
    ("type = scheduled_tick\nevery = 1\npayload = {nope\n", "invalid JSON payload"),
    ("type = scheduled_tick\nevery = 1\ncatch_up = all\n", "catch_up must be one of"),
    ("type = scheduled_tick\nevery = 1\nqueue = no spaces\n", "invalid queue name"),
    ("type = scheduled_tick\nevery = 1\npriority = high\n", "priority must be a whole number"),
    ("type = scheduled_tick\ncron = 0 3 * * *\ntimezone = Europe/Zagrebb\n",
     "unknown time zone 'Europe/Zagrebb'"),
    ("type = scheduled_tick\ncron = 0 3 * * *\ntimezone = ../../etc/passwd\n",
     "unknown time zone '../../etc/passwd'"),
    ("type = scheduled_tick\nevery = 60\ntimezone = Europe/Zagreb\n", "timezone is for cron"),
])
def test_a_bad_schedule_is_a_one_line_error_naming_its_section(tmp_path, body, complaint):
    with pytest.raises(UserError) as caught:
        one(tmp_path, body, name="bad")
    message = str(caught.value)
    assert complaint in message and "[schedule:bad]" in message and "\n" not in message


# -- tick times ----------------------------------------------------------------------

def test_every_n_seconds_is_aligned_to_the_epoch_not_to_the_start(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 300\n")
    moment = at("2026-01-05T14:07:31.250000")
    assert schedule.latest(moment) == at("2026-01-05T14:05:00")
    assert schedule.next_after(moment) == at("2026-01-05T14:10:00")
    on_a_tick = at("2026-01-05T14:10:00")
    assert schedule.latest(on_a_tick) == on_a_tick
    assert schedule.next_after(on_a_tick) == at("2026-01-05T14:15:00")
    assert int(schedule.next_after(moment).timestamp()) % 300 == 0


@pytest.mark.parametrize("cron, moment, latest, following", [
    ("*/15 * * * *", "2026-01-05T14:07:30", "2026-01-05T14:00:00", "2026-01-05T14:15:00"),
    ("*/15 * * * *", "2026-01-05T14:15:00", "2026-01-05T14:15:00", "2026-01-05T14:30:00"),
    ("0 3 * * 1", "2026-01-07T12:00:00", "2026-01-05T03:00:00", "2026-01-12T03:00:00"),
    ("0 0 1 1 *", "2026-06-01T00:00:00", "2026-01-01T00:00:00", "2027-01-01T00:00:00"),
    ("59 23 31 12 *", "2026-12-31T23:59:30", "2026-12-31T23:59:00", "2027-12-31T23:59:00"),
    ("30 2 * * *", "2026-03-29T02:45:00", "2026-03-29T02:30:00", "2026-03-30T02:30:00"),
])
def test_cron_ticks_in_utc(tmp_path, cron, moment, latest, following):
    schedule = one(tmp_path, f"type = scheduled_tick\ncron = {cron}\n")
    assert schedule.latest(at(moment)) == at(latest)
    assert schedule.next_after(at(moment)) == at(following)


# -- cron in a time zone: the daylight-saving days -----------------------------------------

def ticks_enqueued_between(schedule, start, end, step=timedelta(seconds=20)):
    """The keys' ticks the real Scheduler enqueues, its clock read every `step` from
    `start` to `end` (UTC texts), as UTC texts."""
    moment = [at(start).timestamp()]
    scheduler = Scheduler({"s": schedule}, clock=lambda: moment[0])
    view = EnqueueOnly(answer=1)
    while moment[0] <= at(end).timestamp():
        scheduler.tick(time.monotonic(), view)
        moment[0] += step.total_seconds()
    keys = [job.key.split(":", 2)[2] for job in view.jobs]
    assert len(keys) == len(set(keys)), keys   # the scheduler itself never repeats a key
    return keys


def zoned(tmp_path, cron, zone):
    return one(tmp_path, f"type = scheduled_tick\ncron = {cron}\ntimezone = {zone}\n")


@pytest.mark.parametrize("cron, start, end, expected", [
    # Zagreb, 2026-03-29: 02:00 CET is 03:00 CEST (01:00Z). 02:30 does not exist that
    # day: it runs once, at 03:00 CEST; on the days around it, at 02:30.
    ("30 2 * * *", "2026-03-27T12:00:00", "2026-03-30T12:00:00",
     ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
    # Every half hour: 02:00 and 02:30 are skipped, and 03:00 is the instant they
    # skipped to: one tick, not three.
    ("*/30 * * * *", "2026-03-29T00:10:00", "2026-03-29T02:10:00",
     ["2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z",
      "2026-03-29T02:00:00Z"]),
    ("0 2 * * *", "2026-03-28T12:00:00", "2026-03-29T12:00:00", ["2026-03-29T01:00:00Z"]),
    ("0 3 * * *", "2026-03-28T12:00:00", "2026-03-29T12:00:00", ["2026-03-29T01:00:00Z"]),
    # Zagreb, 2026-10-25: 03:00 CEST is 02:00 CET (01:00Z); 02:00-03:00 comes twice.
    # 02:30 runs once, the first time (CEST).
    ("30 2 * * *", "2026-10-24T12:00:00", "2026-10-26T12:00:00",
     ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
    ("*/30 * * * *", "2026-10-24T23:10:00", "2026-10-25T02:40:00",
     ["2026-10-24T23:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z",
      "2026-10-25T02:00:00Z", "2026-10-25T02:30:00Z"]),
    ("0 * * * *", "2026-10-24T22:30:00", "2026-10-25T03:30:00",
     ["2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z",
      "2026-10-25T03:00:00Z"]),
])
def test_cron_in_zagreb_on_the_daylight_saving_days(tmp_path, cron, start, end, expected):
    schedule = zoned(tmp_path, cron, "Europe/Zagreb")
    assert ticks_enqueued_between(schedule, start, end) == expected


@pytest.mark.parametrize("cron, start, end, expected", [
    # Lord Howe (+10:30) moves by 30 minutes. 2026-10-04: 02:00 is 02:30 (15:30Z the
    # day before).
    ("15 2 * * *", "2026-10-02T12:00:00", "2026-10-04T12:00:00",
     ["2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z"]),
    # 2026-04-05: 02:00 is 01:30 again (15:00Z the day before): 01:45 runs once.
    ("45 1 * * *", "2026-04-03T12:00:00", "2026-04-05T12:00:00",
     ["2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z"]),
])
def test_cron_in_a_zone_that_moves_by_half_an_hour(tmp_path, cron, start, end, expected):
    schedule = zoned(tmp_path, cron, "Australia/Lord_Howe")
    assert ticks_enqueued_between(schedule, start, end) == expected


@pytest.mark.parametrize("cron", ["30 2 * * *", "*/20 * * * *", "0 * * * *", "59 1 * * *"])
@pytest.mark.parametrize("day", ["2026-03-29", "2026-10-25"])
def test_latest_and_next_after_agree_with_the_ticks_across_a_change_of_clocks(tmp_path, cron,
                                                                              day):
    schedule = zoned(tmp_path, cron, "Europe/Zagreb")
    start, end = at(f"{day}T00:00:00") - timedelta(hours=6), at(f"{day}T00:00:00") + timedelta(days=1)
    ticks = [at(key.rstrip("Z")) for key in ticks_enqueued_between(
        schedule, iso(start - timedelta(days=1))[:-1], iso(end + timedelta(days=1))[:-1])]
    moment = start
    while moment < end:
        assert schedule.latest(moment) == max(t for t in ticks if t <= moment), moment
        assert schedule.next_after(moment) == min(t for t in ticks if t > moment), moment
        moment += timedelta(minutes=7, seconds=30)


def test_a_schedule_in_utc_by_default_and_named_in_its_armed_event(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\ncron = 30 2 * * *\n")
    assert ticks_enqueued_between(schedule, "2026-10-24T12:00:00", "2026-10-25T12:00:00") == \
        ["2026-10-25T02:30:00Z"]
    assert str(schedule.zone) == "UTC"


def test_a_late_pass_of_the_loop_loses_no_tick(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 1\n")
    missed, ticks = due_ticks(schedule, at("2026-01-05T14:00:10"), at("2026-01-05T14:00:12.400"))
    assert missed is None
    assert [iso(t) for t in ticks] == ["2026-01-05T14:00:11Z", "2026-01-05T14:00:12Z"]


def test_ticks_whose_window_closed_are_missed_not_back_filled(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 60\n")
    done, now = at("2026-01-05T14:00:00"), at("2026-01-05T14:10:30")
    missed, ticks = due_ticks(schedule, done, now)
    assert iso(missed) == "2026-01-05T14:01:00Z"
    assert [iso(t) for t in ticks] == ["2026-01-05T14:10:00Z"]   # its window is still open


def test_catching_up_takes_the_latest_tick_before_the_start_whatever_its_age(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\ncron = 0 3 * * *\n")
    start = at("2026-01-05T14:00:00")
    caught_up = schedule.latest(start)
    assert caught_up == at("2026-01-05T03:00:00")
    before = caught_up - timedelta(microseconds=1)
    assert due_ticks(schedule, before, start, caught_up) == (None, [caught_up])
    assert due_ticks(schedule, caught_up, start) == (None, [])
    # The first pass came late, or the database was away: it still comes first.
    missed, ticks = due_ticks(schedule, before, at("2026-01-08T03:00:05"), caught_up)
    assert missed == at("2026-01-06T03:00:00")
    assert ticks == [caught_up, at("2026-01-08T03:00:00")]


# -- the scheduler as a supervisor observer ---------------------------------------------

class EnqueueOnly:
    """The part of a SupervisorView the scheduler uses: enqueue, answering as told."""

    def __init__(self, answer):
        self.answer, self.jobs = answer, []

    def enqueue(self, new_job):
        self.jobs.append(new_job)
        return self.answer


def test_the_scheduler_enqueues_a_due_tick_through_the_view(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 60\n")
    moment = [at("2026-01-05T14:00:30").timestamp()]
    scheduler = Scheduler({"s": schedule}, clock=lambda: moment[0])
    view = EnqueueOnly(answer=7)
    scheduler.tick(100.0, view)
    assert view.jobs == []   # armed at 14:00:30: the next tick is 14:01
    moment[0] = at("2026-01-05T14:01:00.500").timestamp()
    scheduler.tick(101.0, view)
    assert [job.key for job in view.jobs] == ["schedule:s:2026-01-05T14:01:00Z"]
    scheduler.tick(102.0, view)
    assert len(view.jobs) == 1   # enqueued once


def test_the_scheduler_tries_again_when_the_database_is_away(tmp_path):
    schedule = one(tmp_path, "type = scheduled_tick\nevery = 60\n")
    moment = [at("2026-01-05T14:00:30").timestamp()]
    scheduler = Scheduler({"s": schedule}, clock=lambda: moment[0])
    away = EnqueueOnly(answer=False)
    moment[0] = at("2026-01-05T14:01:00.500").timestamp()
    scheduler.tick(100.0, away)
    scheduler.tick(100.0 + RETRY_INTERVAL / 2, away)   # not yet: one try per interval
    assert len(away.jobs) == 1
    back = EnqueueOnly(answer=8)
    scheduler.tick(100.0 + RETRY_INTERVAL, back)
    assert [job.key for job in back.jobs] == ["schedule:s:2026-01-05T14:01:00Z"]


# -- real supervisors on one database ---------------------------------------------------

@pytest.fixture
def supervisors(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated) as start:
        yield lambda config_text, *args: start(*args, config_text=config_text)


def enqueued_ticks(conn, name):
    """{tick: count of jobs} of one schedule, from the jobs table."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT idempotency_key, COUNT(*) FROM prefork_jobs"
                       " WHERE idempotency_key LIKE %s GROUP BY idempotency_key",
                       (f"schedule:{name}:%",))
        return {at(key.split(":", 2)[2].rstrip("Z")): count for key, count in cursor.fetchall()}


def ticks_of(conn, name):
    return sorted(enqueued_ticks(conn, name))


def test_two_supervisors_enqueue_each_tick_exactly_once(supervisors, clean_db):
    config = SETTINGS + EVERY_SECOND.format(name="pulse")
    first, second = supervisors(config), supervisors(config)
    for sup in (first, second):
        sup.wait_event("schedule_armed", schedule="pulse")
    wait_until(lambda: len(enqueued_ticks(clean_db, "pulse")) >= 6, timeout=15,
               message="six ticks")
    counts = enqueued_ticks(clean_db, "pulse")
    ticks = sorted(counts)
    assert set(counts.values()) == {1}
    assert all(b - a == timedelta(seconds=1) for a, b in zip(ticks, ticks[1:])), ticks
    # Both really enqueued the same ticks: the second got the first one's job back.
    seen = [{event["tick"]: event["job_id"] for event in sup.events("schedule_enqueued")}
            for sup in (first, second)]
    shared = set(seen[0]) & set(seen[1])
    assert len(shared) >= 4
    assert all(seen[0][tick] == seen[1][tick] for tick in shared)


def stop(sup):
    sup.signal(signal.SIGTERM)
    assert sup.wait_exit() == 0


def test_catch_up_latest_enqueues_one_missed_tick_after_a_restart_none_by_default(
        supervisors, clean_db):
    config = (SETTINGS + EVERY_SECOND.format(name="plain")
              + EVERY_SECOND.format(name="eager") + "catch_up = latest\n")
    before = supervisors(config)
    before.wait_event("schedule_enqueued", count=2, schedule="plain")
    before.wait_event("schedule_enqueued", count=2, schedule="eager")
    stop(before)
    last_plain, last_eager = ticks_of(clean_db, "plain")[-1], ticks_of(clean_db, "eager")[-1]
    time.sleep(3.5)                                  # three or more ticks nobody enqueues
    after = supervisors(config)
    armed = {e["schedule"]: e for e in after.wait_event("schedule_armed", count=2)}
    after.wait_event("schedule_enqueued", count=2, schedule="plain")
    next_tick = at(armed["plain"]["next_tick"].rstrip("Z"))
    caught_up = at(armed["eager"]["catch_up_tick"].rstrip("Z"))
    assert caught_up == next_tick - timedelta(seconds=1)
    assert next_tick - last_plain >= timedelta(seconds=4)
    plain_gap = [t for t in ticks_of(clean_db, "plain") if last_plain < t < next_tick]
    eager_gap = [t for t in ticks_of(clean_db, "eager") if last_eager < t < next_tick]
    assert plain_gap == []                           # none: missed ticks stay missed
    assert eager_gap == [caught_up]                  # latest: only the most recent one


@pytest.mark.parametrize("section, complaint", [
    ("[schedule:ghost]\ntype = no_such_type\nevery = 1\n", "has no handler"),
    ("[schedule:ghost]\ntype = scheduled_tick\ncron = 0 25 * * *\n", "invalid cron"),
    ("[schedule:ghost]\ntype = scheduled_tick\ncron = 0 3 * * *\ntimezone = Mars/Olympus\n",
     "unknown time zone 'Mars/Olympus'"),
])
def test_run_refuses_a_bad_schedule_in_one_line_before_forking(tmp_path, migrated, section,
                                                               complaint):
    path = tmp_path / "bad.conf"
    path.write_text(SETTINGS + section)
    result = run_cli("run", "--config", str(path), "--log-format", "json", dsn=migrated,
                     timeout=30)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "[schedule:ghost]" in errors[0] and complaint in errors[0]
    assert_never_logged(result.stderr, "worker_spawned")
    assert_never_logged(result.stderr, "supervisor_started")


def test_sighup_refuses_a_bad_schedule_then_applies_a_good_one(supervisors, clean_db):
    sup = supervisors(SETTINGS)
    sup.wait_children(1)
    sup.config_path.write_text(SETTINGS + "[schedule:ghost]\ntype = no_such_type\nevery = 1\n")
    sup.signal(signal.SIGHUP)
    failed = sup.wait_event("config_reload_failed")[0]
    assert "[schedule:ghost]" in failed["error"] and "no_such_type" in failed["error"]
    time.sleep(0.3)
    # The refused config started no new generation of workers (a good one does), and
    # the supervisor goes on.
    assert sup.proc.poll() is None
    assert {spawned["generation"] for spawned in sup.events("worker_spawned")} == {0}
    assert sup.events("schedule_armed") == []

    sup.config_path.write_text(SETTINGS + EVERY_SECOND.format(name="added"))
    sup.signal(signal.SIGHUP)
    sup.wait_event("config_reloaded")
    sup.wait_event("schedule_enqueued", count=2, schedule="added")
    assert len(ticks_of(clean_db, "added")) >= 2
