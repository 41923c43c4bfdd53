"""Concurrency and rate limits under real supervisors (the CLI in subprocesses), on
MariaDB and SQLite. The handlers (tests/apps/limits_app.py) append start and end
lines to an execution log; what a test proves is read from it: how many ran at
once, how many started in a window. Deadlines bound waits, generously; nothing
assumes a fast machine beyond the rate itself (20 starts a second)."""
import os
import signal
import time
from typing import NamedTuple

import pytest
from conftest import wait_until
from harness import supervisor_starter

from prefork.jobs import new_job

APP = "--app", "limits_app"
FAST_POLL = "--poll-interval", "0.5"


class Run(NamedTuple):
    job_id: int
    job_type: str
    key: str
    pid: int
    start: float
    end: float   # inf: no end logged (its process was killed, see read_runs)


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


def read_runs(path, killed_at=None):
    """The runs of the execution log. A run with no end line ended when its process
    was killed (killed_at: {pid: time}), else it counts as running for ever."""
    killed_at = killed_at or {}
    starts, ends = {}, {}
    if not os.path.exists(path):
        return []
    for line in open(path).read().splitlines():
        kind, job_id, job_type, key, pid, at = line.split()
        (starts if kind == "start" else ends)[(int(job_id), int(pid))] = (job_type, key, float(at))
    return [Run(job_id, job_type, key, pid, at,
                ends.get((job_id, pid), (None, None, killed_at.get(pid, float("inf"))))[2])
            for (job_id, pid), (job_type, key, at) in starts.items()]


def most_at_once(runs):
    """The most runs that overlapped in time (an end at the same instant as a start
    counts first: the slot was free)."""
    marks = sorted([(run.start, 1) for run in runs] + [(run.end, -1) for run in runs])
    running = most = 0
    for _, step in marks:
        running += step
        most = max(most, running)
    return most


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
    """MariaDB: two supervisors of 4 workers on one database, one limit of 2."""
    store = store()
    log = tmp_path / "exec.log"
    jobs = enqueue(store, "limited.pair", 16, log, seconds=0.3)
    with supervisor_starter(tmp_path, migrated, *APP, *FAST_POLL) as start:
        first, second = start("--workers", "4"), start("--workers", "4")
        pids_of = {sup.name: {child.pid for child in sup.wait_children(4)}
                   for sup in (first, second)}
        wait_done(store, jobs, timeout=120)
    wait_done(store, jobs, timeout=120)
    runs = read_runs(log)
    assert most_at_once(runs) == 2
    assert all(pids & {run.pid for run in runs} for pids in pids_of.values()), \
        "both supervisors ran limited jobs"


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


def running_pids(path, killed_at):
    return {run.pid for run in read_runs(path, killed_at) if run.end == float("inf")}


# -- rate -------------------------------------------------------------------------

def test_a_rate_of_20_per_second_starts_200_in_10_seconds(supervisors, queue, tmp_path):
    """A backlog of 300 limited.rate jobs (20/s), 4 workers: the starts in the 10 s
    from the first one are 200 ± 5% (the bucket starts with one token)."""
    _, store = queue
    log, claim_log = tmp_path / "exec.log", tmp_path / "claims"
    jobs = enqueue(store, "limited.rate", 300, log)
    supervisors("--workers", "4", env={"LIMITS_CLAIM_LOG": str(claim_log)})
    wait_until(lambda: len(read_runs(log)) >= 220, timeout=120, message="220 starts")
    starts = sorted(run.start for run in read_runs(log))
    first = starts[0]
    in_window = sum(1 for at in starts if at < first + 10.0)
    assert 190 <= in_window <= 210, f"{in_window} starts in 10 s at 20/s"
    tried = claims(claim_log, first, first + 10.0)
    assert tried <= 2 * in_window, f"{tried} limited claims for {in_window} starts"
    wait_done(store, jobs, timeout=120)
