"""Chaos for the limits: two supervisors on one database run limited jobs (limit 2
per concurrency key, a few keys) while random children running limited jobs are
SIGKILLed and one supervisor is SIGKILLed and started again. Then a check that
the limit was never exceeded and never stuck: every job ends done (none left
ready or reserved), and at no instant did more than 2 runs of a key overlap
(tests/apps/limits_app.py's execution log: a run killed before its end line
ends when its child was killed).

run_limits(db, settings, workdir, log) -> chaos.Report, for tests/chaos.py's
scenarios (the lead wires it into its command line and tests/soak/test_chaos.py):

    @pytest.mark.soak
    def test_limits_hold_under_kills(throwaway_mariadb, tmp_path):
        report = run_limits(Database(throwaway_mariadb.dsn, environ={}),
                            LimitsSettings(), tmp_path)
        assert report.figures["kills"] >= 5, report.text()
        assert_report(report)
"""
import os
import signal
import time
from dataclasses import dataclass
from typing import NamedTuple

from chaos import Scenario, Supervisor, _event_time, supervisor_args
from polling import poll_until

from prefork.jobs import new_job
from prefork.store.mysql.store import MySQLStore

LIMITED_TYPE = "limited.pair"   # tests/apps/limits_app.py: at most 2 at once per key
LIMIT = 2
APPS = "chaos_app,limits_app"


@dataclass
class LimitsSettings:
    jobs: int = 240
    keys: int = 3
    workers: int = 4              # per supervisor, two supervisors
    work_seconds: tuple = (0.05, 0.4)
    chaos_seconds: float = 20.0
    kill_every: tuple = (0.2, 0.6)   # seconds between SIGKILLs of a child running a limited job
    lease_seconds: float = 5.0
    max_attempts: int = 50
    max_crashes: int = 50
    retry_base: float = 0.05
    retry_cap: float = 0.5
    graceful_timeout: float = 10.0
    restart_backoff_cap: float = 1.0
    poll_interval: float = 0.5
    drain_timeout: float = 240.0
    seed: int = 16

    @classmethod
    def full(cls):
        return cls(jobs=3000, keys=10, workers=8, chaos_seconds=120.0, drain_timeout=900.0)


class Run(NamedTuple):
    job_id: int
    job_type: str
    key: str
    pid: int
    start: float
    end: float   # inf: no end logged (its process was killed, see read_runs)


def read_runs(path, killed_at=None):
    """The runs of limits_app's execution log. A run with no end line ended when its
    process was killed (killed_at: {pid: time}), else it counts as running for ever."""
    killed_at = killed_at or {}
    starts, ends = {}, {}
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        for line in handle.read().splitlines():
            kind, job_id, job_type, key, pid, at = line.split()
            (starts if kind == "start" else ends)[(int(job_id), int(pid))] = \
                (job_type, key, float(at))
    return [Run(job_id, job_type, key, pid, at,
                ends[(job_id, pid)][2] if (job_id, pid) in ends
                else killed_at.get(pid, float("inf")))
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


def running_pids(path, killed_at):
    return {run.pid for run in read_runs(path, killed_at) if run.end == float("inf")}


def _enqueue(scenario, settings, exec_log):
    store = MySQLStore(scenario.db.config)
    try:
        jobs = [new_job(LIMITED_TYPE, {"log": str(exec_log), "key": f"k{number % settings.keys}",
                                       "seconds": round(scenario.rng.uniform(
                                           *settings.work_seconds), 3)},
                        queue=scenario.queue, concurrency_key=f"k{number % settings.keys}",
                        max_attempts=settings.max_attempts)
                for number in range(settings.jobs)]
        return store.enqueue_many(jobs)
    finally:
        store.close()


def _supervisor(scenario, name, settings):
    args = supervisor_args(settings, scenario.queue, settings.workers)
    args[args.index("--app") + 1] = APPS
    sup = Supervisor(scenario.workdir, f"{scenario.run}-{name}", scenario.db.dsn, args,
                     scenario.environ)
    scenario.supervisors.append(sup)
    return sup


def _kill_loop(scenario, settings, exec_log, doomed, restart):
    """SIGKILL a child running a limited job every kill_every; halfway, SIGKILL the
    supervisor `doomed` and start another (restart()). Returns (kills, killed_at)."""
    killed_at = {}
    kills = 0
    ends = time.monotonic() + settings.chaos_seconds
    halfway = time.monotonic() + settings.chaos_seconds / 2
    while time.monotonic() < ends:
        time.sleep(scenario.rng.uniform(*settings.kill_every))
        running = sorted(running_pids(exec_log, killed_at))
        if running:
            pid = scenario.rng.choice(running)
            try:
                os.kill(pid, signal.SIGKILL)
                killed_at[pid] = time.time()
                kills += 1
            except ProcessLookupError:
                pass
        if doomed is not None and time.monotonic() >= halfway:
            os.kill(doomed.pid, signal.SIGKILL)   # its children quick-stop, orphaned
            scenario.log(f"SIGKILLed supervisor {doomed.name}")
            doomed = None
            restart()
    return kills, killed_at


def deaths(scenario, killed_at):
    """When each child the kill loop SIGKILLed was dead: the earlier of the kill loop's
    clock just after os.kill() and its supervisor's worker_exited, which comes before the
    job goes back (no other run can take its slot before). On a loaded host the loop
    may be descheduled between os.kill() and reading the clock: its time alone then
    makes a killed run last into the next run of its key."""
    exited = {event["pid"]: _event_time(event)
              for sup in scenario.supervisors for event in sup.events("worker_exited")}
    return {pid: min(at, exited.get(pid, at)) for pid, at in killed_at.items()}


def run_limits(db, settings=None, workdir=None, log=None):
    """The limits scenario; returns a chaos.Report."""
    settings = settings or LimitsSettings()
    with Scenario(db, "l", "limits: two supervisors, limited jobs, SIGKILLed children and a "
                  "SIGKILLed supervisor", settings, workdir, log) as scenario:
        report = scenario.report
        exec_log = scenario.workdir / f"{scenario.run}-limited.log"
        added = _enqueue(scenario, settings, exec_log)
        report.check("the limited jobs were enqueued", added == settings.jobs,
                     f"{added} of {settings.jobs}")
        first = _supervisor(scenario, "a", settings)
        _supervisor(scenario, "b", settings)
        kills, killed_at = _kill_loop(
            scenario, settings, exec_log, first,
            lambda: _supervisor(scenario, "a2", settings))
        scenario.log(f"chaos over: {kills} children killed")
        try:
            poll_until(lambda: not db.unfinished(scenario.queue), settings.drain_timeout,
                       interval=0.5, message="the limited jobs to finish")
        except TimeoutError:
            pass
        left = db.unfinished(scenario.queue)
        report.check("no limited job stuck: every one finished", not left,
                     f"{left} jobs still ready or reserved")
        statuses = dict(db.query("SELECT status, COUNT(*) FROM prefork_jobs WHERE queue = %s"
                                 " GROUP BY status", (scenario.queue,)))
        report.check("every limited job done", statuses == {"done": settings.jobs},
                     f"statuses {statuses}")
        runs = read_runs(exec_log, deaths(scenario, killed_at))
        worst = {key: most_at_once([run for run in runs if run.key == key])
                 for key in sorted({run.key for run in runs})}
        report.check(f"never more than {LIMIT} runs of a key at once",
                     all(most <= LIMIT for most in worst.values()), f"most at once {worst}")
        report.check("the limit was used (2 of a key did run at once)",
                     any(most == LIMIT for most in worst.values()), f"most at once {worst}")
        code = scenario.stop_all()
        report.figures.update(jobs=settings.jobs, keys=settings.keys, kills=kills,
                              runs=len(runs), most_at_once=worst, exit_statuses=code)
        scenario.check_no_leftovers()
    return report
