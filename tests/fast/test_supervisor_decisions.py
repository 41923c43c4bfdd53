"""The supervisor's decisions alone: no process, no pipe, no database."""
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

from prefork.supervisor import decisions


@dataclass
class Child:
    name: str
    started: float = 0.0
    busy: bool = False
    generation: int = 0
    retire_reason: Optional[str] = None
    stop_cause: Optional[str] = None
    started_wall: float = 0.0
    successor: Optional[int] = None
    last_job: bool = False


def names(children):
    return [child.name for child in children]


# -- which child goes first ---------------------------------------------------------

def test_extras_are_idle_before_busy_then_oldest_first():
    wanted = [Child("busy-old", 1, busy=True), Child("idle-new", 5), Child("idle-old", 2),
              Child("busy-new", 6, busy=True)]
    assert names(decisions.extras(wanted, 4)) == []
    assert names(decisions.extras(wanted, 3)) == ["idle-old"]
    assert names(decisions.extras(wanted, 1)) == ["idle-old", "idle-new", "busy-old"]
    assert names(decisions.extras(wanted, 0)) == ["idle-old", "idle-new", "busy-old", "busy-new"]


def test_a_reload_replaces_the_older_generation_idle_and_oldest_first():
    children = [Child("new-gen", 1, generation=2), Child("busy", 2, busy=True, generation=1),
                Child("idle-young", 4, generation=1), Child("idle-old", 3, generation=1)]
    assert decisions.next_replacement(children, generation=2, spare_count=1).name == "idle-old"
    assert decisions.next_replacement(children, generation=1, spare_count=1).name == "new-gen"


def test_one_rolling_replacement_at_a_time():
    children = [Child("restarting", 1, retire_reason="restart"), Child("old", 2, generation=0)]
    assert decisions.next_replacement(children, 1, spare_count=4).name == "restarting"
    for cause in decisions.ROLLING_CAUSES:
        children[0].stop_cause = cause   # being replaced: the next waits for it
        assert decisions.next_replacement(children, 1, spare_count=4) is None
    children[0].stop_cause = "scale down"   # not a replacement: the next may go
    assert decisions.next_replacement(children, 1, spare_count=4).name == "old"


def test_a_rolling_replacement_waits_while_successors_use_the_spares():
    children = [Child("old", 1, generation=0), Child("handing-over", 2, generation=1,
                                                    retire_reason="max-items", successor=99)]
    assert decisions.next_replacement(children, 1, spare_count=1) is None
    assert decisions.next_replacement(children, 1, spare_count=2).name == "old"


def test_recycling_gets_a_successor_not_a_rolling_stop():
    recycling = Child("recycling", 1, retire_reason="max-items", generation=0)
    assert decisions.next_replacement([recycling], generation=1, spare_count=2) is None
    assert names(decisions.successors_due([recycling], spare_count=2)) == ["recycling"]


def test_successors_are_forked_within_the_spares_idle_then_oldest_first():
    children = [Child(f"retiring-{age}", age, retire_reason="max-items") for age in (3, 1, 2)]
    children.append(Child("busy-leaking", 0, busy=True, retire_reason="max-memory"))
    children.append(Child("working", 0))
    assert names(decisions.successors_due(children, spare_count=2)) == ["retiring-1",
                                                                       "retiring-2"]
    children[1].successor = 101   # retiring-1 has its successor: one spare left
    assert names(decisions.successors_due(children, spare_count=2)) == ["retiring-2"]
    children[2].successor = 102
    assert decisions.successors_due(children, spare_count=2) == []
    # A child stopped for a reload holds a spare until it is reaped, as a predecessor does.
    children[1].successor = children[2].successor = None
    children[4].stop_cause = "reload"
    assert names(decisions.successors_due(children, spare_count=2)) == ["retiring-1"]


def test_a_child_on_its_last_job_gets_a_successor_after_those_that_asked():
    last = Child("last-job", 1, busy=True, last_job=True)
    asked = Child("asked", 5, retire_reason="max-items")
    assert names(decisions.successors_due([last, asked], spare_count=1)) == ["asked"]
    assert names(decisions.successors_due([last, asked], spare_count=2)) == ["asked",
                                                                            "last-job"]
    last.successor = 7   # running its last job, successor forked: not stopped before it asks
    assert decisions.predecessors_to_stop([last], lambda pid: True) == []
    assert decisions.stops_due([last], []) == []


def test_a_child_that_asked_and_gets_no_successor_is_stopped_at_once():
    asked = [Child(f"asked-{age}", age, retire_reason="max-items") for age in (1, 2, 3)]
    successors = decisions.successors_due(asked, spare_count=1)
    assert names(successors) == ["asked-1"]
    assert names(decisions.stops_due(asked, successors)) == ["asked-2", "asked-3"]
    asked[0].successor = 9   # forked: waits for it, not stopped
    assert names(decisions.stops_due(asked, [])) == ["asked-2", "asked-3"]


def test_extras_count_the_stopping_but_stop_only_the_others():
    wanted = [Child("going", 1, stop_cause="max-items"), Child("a", 2), Child("b", 3)]
    assert names(decisions.extras(wanted, 2)) == ["a"]
    assert names(decisions.extras(wanted, 3)) == []


def test_a_predecessor_is_stopped_once_its_successor_is_ready():
    waiting = Child("waiting", 1, retire_reason="max-items", successor=11)
    handed = Child("handed-over", 2, retire_reason="max-items", successor=12)
    stopped = Child("stopped", 3, retire_reason="max-items", successor=13,
                    stop_cause="max-items")
    ready = {11: False, 12: True, 13: True}
    chosen = decisions.predecessors_to_stop([waiting, handed, stopped], ready.get)
    assert names(chosen) == ["handed-over"]


def test_spares_are_a_quarter_of_the_pool_and_at_least_one():
    assert [decisions.spares(workers) for workers in (1, 3, 4, 5, 8, 9, 32)] == \
        [1, 1, 1, 2, 2, 3, 8]


def test_nothing_to_replace_when_every_child_is_current():
    children = [Child("a", 1, generation=3), Child("b", 2, generation=3)]
    assert decisions.next_replacement(children, generation=3, spare_count=1) is None
    assert decisions.next_replacement([], generation=3, spare_count=1) is None


# -- the restart request (database clock) ---------------------------------------------

DB_NOW = datetime(2026, 12, 1, 12, 0, 0)


def wall(moment):
    return moment.replace(tzinfo=timezone.utc).timestamp()


def test_a_restart_request_applies_once_and_not_before_its_time():
    requested = DB_NOW - timedelta(seconds=5)
    assert decisions.restart_request_applies(requested, DB_NOW, applied=None)
    assert not decisions.restart_request_applies(requested, DB_NOW, applied=requested)
    assert decisions.restart_request_applies(requested, DB_NOW, applied=requested - timedelta(1))
    assert not decisions.restart_request_applies(DB_NOW + timedelta(seconds=1), DB_NOW, None)
    assert decisions.restart_request_applies(DB_NOW, DB_NOW, None)
    assert not decisions.restart_request_applies(None, DB_NOW, None)


def test_children_started_before_the_request_by_the_database_clock_are_retired():
    requested = DB_NOW - timedelta(seconds=10)
    # Our clock runs 60 s behind the database's: a child started 20 s ago by our
    # clock started at DB_NOW - 20 s by the database's.
    local_now = DB_NOW - timedelta(seconds=60)
    before = Child("before", started_wall=wall(local_now - timedelta(seconds=20)))
    after = Child("after", started_wall=wall(local_now - timedelta(seconds=5)))
    retiring = Child("retiring", started_wall=wall(local_now - timedelta(seconds=30)),
                     retire_reason="max-items")
    stopping = Child("stopping", started_wall=wall(local_now - timedelta(seconds=30)),
                     stop_cause="scale down")
    chosen = decisions.to_restart([before, after, retiring, stopping], requested, DB_NOW, local_now)
    assert names(chosen) == ["before"]
    # Read on our clock alone, "after" would look 65 s older than the request.
    assert not decisions.started_before(after.started_wall, requested, DB_NOW, local_now)


# -- back-off and what is due --------------------------------------------------------

def test_restart_backoff_doubles_from_half_a_second_up_to_the_cap():
    delays = [decisions.restart_backoff(failures, cap=10.0) for failures in range(1, 8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_hard_timeout_is_due_only_past_it_and_only_when_set():
    assert not decisions.hard_timeout_due(since=100.0, now=105.0, hard_timeout=5.0)
    assert decisions.hard_timeout_due(since=100.0, now=105.1, hard_timeout=5.0)
    assert not decisions.hard_timeout_due(since=0.0, now=1e9, hard_timeout=None)
    assert not decisions.hard_timeout_due(since=0.0, now=1e9, hard_timeout=0)


def test_write_behind_is_due_after_its_delay():
    after = decisions.WRITE_BEHIND_AFTER
    assert not decisions.write_behind_due(unsaved_since=100.0, now=100.0 + after / 2)
    assert decisions.write_behind_due(unsaved_since=100.0, now=100.0 + after)


def test_only_jobs_older_than_a_third_of_the_lease_need_an_extension():
    assert not decisions.lease_extension_due(since=100.0, now=105.0, lease_seconds=30.0)
    assert decisions.lease_extension_due(since=100.0, now=110.0, lease_seconds=30.0)


# -- a silent supervisor's jobs: is their holder still running here? ------------------

NOW = 1_000_000.0


def started(**pids):
    """started_at(pid) for these live processes ({"p<pid>": start time}); others: none."""
    return lambda pid: pids.get(f"p{pid}")


def test_a_live_holder_on_this_host_keeps_its_job():
    alive = started(p42=NOW - 100)   # started 100 s ago, claimed 10 s ago
    assert decisions.holder_may_run("host-a:42", 10, "host-a", alive, NOW)


def test_a_gone_holder_or_one_on_another_host_gives_the_job_back():
    assert not decisions.holder_may_run("host-a:42", 10, "host-a", started(), NOW)
    alive = started(p42=NOW - 100)
    assert not decisions.holder_may_run("host-b:42", 10, "host-a", alive, NOW)


def test_a_process_started_after_the_claim_only_reuses_the_pid():
    reused = started(p42=NOW - 5)   # claimed 10 s ago by a process now gone
    assert not decisions.holder_may_run("host-a:42", 10, "host-a", reused, NOW)
    just_before = started(p42=NOW - 10 + decisions.START_TIME_SLACK / 2)   # clock ticks
    assert decisions.holder_may_run("host-a:42", 10, "host-a", just_before, NOW)


def test_a_worker_field_we_did_not_write_gives_the_job_back():
    alive = started(p42=NOW - 100)
    for worker in ("", "host-a", "host-a:", "host-a:4²", "host-a:-42"):
        assert not decisions.holder_may_run(worker, 10, "host-a", alive, NOW)
    assert decisions.holder_may_run("host:with:colons:42", 10, "host:with:colons", alive, NOW)


def test_jobs_are_handed_at_the_fork_only_forked_per_job_without_limits_or_jitter():
    @dataclass
    class Settings:
        max_items: int
        max_items_jitter: int = 0

    assert decisions.hand_jobs_at_fork(Settings(1), limits_declared=False)
    assert not decisions.hand_jobs_at_fork(Settings(1), limits_declared=True)
    assert not decisions.hand_jobs_at_fork(Settings(1, max_items_jitter=2), False)
    assert not decisions.hand_jobs_at_fork(Settings(2), False)
    assert not decisions.hand_jobs_at_fork(Settings(0), False)


def test_the_supervisor_claims_for_long_lived_children_without_limits():
    @dataclass(frozen=True)
    class Settings:
        claimer: str
        max_items: int = 0
        max_items_jitter: int = 0

    assert decisions.supervisor_claims(Settings("supervisor"), limits_declared=False)
    assert decisions.supervisor_claims(Settings("supervisor", max_items=100), False)
    assert decisions.supervisor_claims(Settings("supervisor", 1, max_items_jitter=3), False)
    assert not decisions.supervisor_claims(Settings("worker"), False)
    assert not decisions.supervisor_claims(Settings("supervisor"), limits_declared=True)
    assert not decisions.supervisor_claims(Settings("supervisor", max_items=1), False), \
        "a child forked per job is handed its job at the fork"
