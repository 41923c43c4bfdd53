"""Concurrency and rate limits under real supervisors (the CLI in subprocesses), on
MariaDB and SQLite. The handlers (tests/apps/limits_app.py) append start and end
lines to an execution log; what a test proves is read from it: how many ran at
once, how many started in a window. Deadlines bound waits, generously; nothing
assumes a fast machine beyond the rate itself (20 starts a second)."""
import os
import signal
import time

import pytest
from conftest import run_cli, wait_until
from harness import supervisor_starter
from limits_chaos import most_at_once, read_runs, running_pids

import prefork
import prefork.testing
from prefork import registry
from prefork.jobs import new_job

APP = "--app", "limits_app"
FAST_POLL = "--poll-interval", "0.5"


@pytest.fixture
def queue(backend, request):
    """(dsn, store) of an empty, migrated queue on the backend under test."""
    dsn = request.getfixturevalue("migrated" if backend == "mysql" else "sqlite_migrated")
    return dsn, request.getfixturevalue("backend_store")()


@pytest.fixture
def supervisors(tmp_path, queue):
    with supervisor_starter(tmp_path, queue[0], *APP, *FAST_POLL) as start:
        yield start


def enqueue(store, job_type, count, log, key=None, **payload):
    payload = {"log": str(log), **payload, **({"key": key} if key else {})}
    return [store.enqueue(new_job(job_type, payload, concurrency_key=key, max_attempts=20))
            for _ in range(count)]


def finished(store, job_ids):
    return all(store.get(job_id)["status"] == "done" for job_id in job_ids)


def wait_done(store, job_ids, timeout):
    wait_until(lambda: finished(store, job_ids), timeout=timeout,
               message=f"{len(job_ids)} jobs done")


def claims(path, since=0.0, until=float("inf")):
    """Limited claims logged by the workers in [since, until)."""
    if not os.path.exists(path):
        return 0
    return sum(1 for line in open(path).read().splitlines()
               if since <= float(line.split()[2]) < until)


# -- concurrency ------------------------------------------------------------------

def test_a_limit_of_2_with_8_workers_never_runs_more_than_2(supervisors, queue, tmp_path):
    _, store = queue
    log = tmp_path / "exec.log"
    jobs = enqueue(store, "limited.pair", 12, log, seconds=0.3)
    supervisors("--workers", "8")
    wait_done(store, jobs, timeout=120)
    runs = read_runs(log)
    assert len(runs) == 12
    assert most_at_once(runs) == 2   # never more; and two did run at once


def test_two_supervisors_together_respect_one_limit(tmp_path, migrated, store):
    """MariaDB: two supervisors of 4 workers on one database, one limit of 2. Each
    serves a queue of its own, so that both must run their jobs: the limit is one
    for the type (its jobs without a key), whatever queue they are in."""
    store = store()
    log = tmp_path / "exec.log"
    jobs = {queue: [store.enqueue(new_job("limited.pair", {"log": str(log), "seconds": 0.3},
                                          queue=queue)) for _ in range(8)]
            for queue in ("east", "west")}
    with supervisor_starter(tmp_path, migrated, *APP, *FAST_POLL) as start:
        for queue in jobs:
            start("--workers", "4", "--queues", queue)
        wait_done(store, jobs["east"] + jobs["west"], timeout=180)
    runs = read_runs(log)
    assert len(runs) == 16
    assert most_at_once(runs) == 2


def test_keys_are_independent(supervisors, queue, tmp_path):
    """limited.single (1 at once) with two keys: two run at once, one per key."""
    _, store = queue
    log = tmp_path / "exec.log"
    jobs = enqueue(store, "limited.single", 5, log, key="account-1", seconds=0.4)
    jobs += enqueue(store, "limited.single", 5, log, key="account-2", seconds=0.4)
    supervisors("--workers", "6")
    wait_done(store, jobs, timeout=120)
    runs = read_runs(log)
    for key in ("account-1", "account-2"):
        assert most_at_once([run for run in runs if run.key == key]) == 1
    assert most_at_once(runs) == 2


def test_one_busy_key_does_not_hide_the_keys_behind_it(supervisors, queue, tmp_path):
    """Ten jobs of one key queued first, waiting on its limit of 1: a job of another
    key, queued after them, runs while the first key's first job still runs."""
    _, store = queue
    log, release = tmp_path / "exec.log", tmp_path / "release"
    busy = enqueue(store, "limited.single", 10, log, key="busy", until=str(release))
    other = enqueue(store, "limited.single", 1, log, key="other")
    supervisors("--workers", "3")
    wait_done(store, other, timeout=60)
    assert [run.key for run in read_runs(log) if run.job_id in busy] == ["busy"]
    release.touch()
    wait_done(store, busy, timeout=120)


def test_plain_jobs_keep_flowing_while_limited_ones_wait_without_a_polling_storm(
        tmp_path, queue):
    """One limited.single job holds its limit (until released) with 5 more waiting on
    it: 30 plain jobs enqueued meanwhile all run, and the workers' limited claims
    while the limit is full stay within one per poll (plus the first looks)."""
    dsn, store = queue
    log, release, claim_log = tmp_path / "exec.log", tmp_path / "release", tmp_path / "claims"
    limited = enqueue(store, "limited.single", 6, log, until=str(release))
    with supervisor_starter(tmp_path, dsn, *APP, *FAST_POLL) as start:
        start("--workers", "4", env={"LIMITS_CLAIM_LOG": str(claim_log)})
        wait_until(lambda: len(read_runs(log)) == 1, timeout=60, message="the first limited run")
        plain = enqueue(store, "plain.note", 30, log)
        wait_done(store, plain, timeout=60)
        window_start = time.time()
        time.sleep(4.0)   # a window to count in, with the limit full and 5 jobs waiting
        window_claims = claims(claim_log, window_start, time.time())
        assert [run.job_id for run in read_runs(log) if run.job_type == "limited.single"] == \
            limited[:1]
        polls = 4.0 / 0.5
        assert window_claims <= polls + 4, f"{window_claims} limited claims in 4 s"
        release.touch()
        wait_done(store, limited, timeout=60)
    assert most_at_once([run for run in read_runs(log) if run.job_type == "limited.single"]) == 1


def test_killed_children_and_supervisors_never_leave_a_slot_taken(supervisors, queue, tmp_path,
                                                                   backend):
    """SIGKILL the children running limited jobs, twice, then the supervisor itself
    (a second one runs on): every job ends done, and no more than 2 ever ran at once
    (a killed run ends when its child was killed)."""
    _, store = queue
    log = tmp_path / "exec.log"
    jobs = enqueue(store, "limited.pair", 14, log, seconds=0.8)
    doomed = supervisors("--workers", "4", "--lease-seconds", "5")
    killed_at = {}
    for round_number in range(2):
        wait_until(lambda: len(running_pids(log, killed_at)) == 2, timeout=60,
                   message=f"two limited runs (round {round_number + 1})")
        for pid in running_pids(log, killed_at):
            os.kill(pid, signal.SIGKILL)
            killed_at[pid] = time.time()
    wait_until(lambda: len(running_pids(log, killed_at)) >= 1, timeout=60,
               message="a limited run before the supervisor is killed")
    survivor = supervisors("--workers", "4", "--lease-seconds", "5")
    os.kill(doomed.proc.pid, signal.SIGKILL)
    wait_done(store, jobs, timeout=180)
    runs = read_runs(log, killed_at)
    assert most_at_once(runs) <= 2
    assert survivor.proc.poll() is None


# -- rate -------------------------------------------------------------------------

def test_a_rate_of_20_per_second_starts_200_in_10_seconds(supervisors, queue, tmp_path):
    """A backlog of 230 limited.rate jobs (20/s), 4 workers: the starts in the 10 s
    from the first one are 200 ± 5% (the bucket starts with one token). 230: enough
    for a limiter that lets too many through to show it, few to wait for after."""
    _, store = queue
    log, claim_log = tmp_path / "exec.log", tmp_path / "claims"
    jobs = enqueue(store, "limited.rate", 230, log)
    supervisors("--workers", "4", env={"LIMITS_CLAIM_LOG": str(claim_log)})
    wait_until(lambda: len(read_runs(log)) >= 220, timeout=120, message="220 starts")
    starts = sorted(run.start for run in read_runs(log))
    first = starts[0]
    in_window = sum(1 for at in starts if at < first + 10.0)
    assert 190 <= in_window <= 210, f"{in_window} starts in 10 s at 20/s"
    # Bounded, not a storm: about 1.4 claims a start on a quiet machine (the workers
    # that lose a token back off); a loaded one desynchronises them less well.
    tried = claims(claim_log, first, first + 10.0)
    assert tried <= 3 * in_window, f"{tried} limited claims for {in_window} starts"
    wait_done(store, jobs, timeout=120)


def test_limited_jobs_run_while_a_plain_backlog_keeps_every_worker_busy(supervisors, queue,
                                                                        tmp_path):
    """60 plain jobs of 0.2 s ahead of 3 limited ones, 2 workers: the limited ones do
    not wait for the backlog (the parent pokes a busy child once a poll)."""
    _, store = queue
    log = tmp_path / "exec.log"
    plain = enqueue(store, "plain.note", 60, log, seconds=0.2)
    supervisors("--workers", "2")
    wait_until(lambda: len(read_runs(log)) >= 4, timeout=60, message="the backlog running")
    limited = enqueue(store, "limited.pair", 3, log)
    wait_done(store, limited, timeout=60)
    assert not finished(store, plain), "the limited jobs waited for the whole backlog"
    wait_done(store, plain, timeout=120)


# -- declaring ---------------------------------------------------------------------

COMMAND_SCRIPT = """#!/bin/sh
echo "start $1 cmd.limited - $$ $(date +%s.%N)" >> "$2"
sleep 0.3
echo "end $1 cmd.limited - $$ $(date +%s.%N)" >> "$2"
"""


def command_config(tmp_path, limit_lines):
    script = tmp_path / "run.sh"
    script.write_text(COMMAND_SCRIPT)
    script.chmod(0o755)
    return f"[command:cmd.limited]\nargv = {script} {{n}} {{log}}\n{limit_lines}"


def test_a_command_sections_limit_holds_and_a_reload_changes_it(supervisors, queue, tmp_path):
    _, store = queue
    log = tmp_path / "exec.log"
    jobs = [store.enqueue(new_job("cmd.limited", {"n": n, "log": str(log)}))
            for n in range(1, 7)]
    sup = supervisors("--workers", "4",
                      config_text=command_config(tmp_path, "concurrency = 1\nrate = 100/s\n"))
    published = sup.wait_event("limits_published")[0]
    assert "cmd.limited" in published["limited"].split(",")
    wait_done(store, jobs, timeout=120)
    assert len(read_runs(log)) == 6 and most_at_once(read_runs(log)) == 1
    sup.config_path.write_text(command_config(tmp_path, ""))
    sup.signal(signal.SIGHUP)
    again = sup.wait_event("limits_published", count=2)[1]
    assert "cmd.limited" not in again["limited"].split(",")
    assert "limited.pair" in again["limited"].split(",")


@pytest.mark.parametrize("lines, problem", [
    ("concurrency = 0", "invalid concurrency 0"),
    ("concurrency = two", "invalid concurrency 'two'"),
    ("rate = 5/d", "invalid rate '5/d'"),
])
def test_a_bad_limit_in_a_command_section_stops_the_start_in_one_line(
        tmp_path, sqlite_migrated, lines, problem):
    config = tmp_path / "bad.conf"
    config.write_text(command_config(tmp_path, lines + "\n"))
    result = run_cli("run", "--config", str(config), *APP, dsn=sqlite_migrated, timeout=60)
    assert result.returncode != 0
    line, = result.stderr.strip().splitlines()
    assert "[command:cmd.limited]" in line and problem in line, line


@pytest.mark.parametrize("arguments, problem", [
    ({"concurrency": 0}, "invalid concurrency 0"),
    ({"concurrency": True}, "invalid concurrency True"),
    ({"rate": "100/week"}, "invalid rate '100/week'"),
    ({"rate": 100}, "invalid rate 100"),
])
def test_a_bad_limit_in_the_decorator_is_a_one_line_value_error(arguments, problem):
    with pytest.raises(ValueError) as raised:
        prefork.handler("decl.bad", **arguments)
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    assert registry.lookup("decl.bad") is None


# -- test mode -----------------------------------------------------------------------

@pytest.fixture
def inline_limited_types():
    """Two limited handlers in this process, their limits removed afterwards (other
    tests' workers share the registry)."""
    ran = []

    @prefork.handler("inline_limits.slow_rate", concurrency=1, rate="1/h")
    def slow_rate(job):
        ran.append(job.id)

    @prefork.handler("inline_limits.spawner")
    def spawner(job):
        ran.append(job.id)
        slow_rate.enqueue({"from": job.id})

    yield ran, slow_rate, spawner
    for job_type in ("inline_limits.slow_rate", "inline_limits.spawner"):
        registry.set_limit(job_type, None)


def test_drain_runs_limited_jobs_without_waiting_for_their_rate(inline_limited_types):
    """drain() runs limited jobs through the limited claim (they are enqueued as
    limited: inline() publishes the limits), a rate of one an hour included, and the
    limited jobs that other jobs enqueue."""
    ran, slow_rate, spawner = inline_limited_types
    with prefork.testing.inline() as queue:
        first = [slow_rate.enqueue({"n": n}) for n in range(3)]
        parent = spawner.enqueue({})
        assert queue.get(first[0])["limited"] == 1
        result = queue.drain()
    assert len(result.done) == 5 and not result.dead and len(ran) == 5
    assert set(first) | {parent} <= set(result.done)
