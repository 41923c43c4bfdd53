"""Chaos for workflows: groups with callbacks, chains, a chain whose step is a group
and a group of chains, and a few groups that wait for every member to end while one
member fails for good, run by a supervisor whose children are SIGKILLed every
100-300 ms and which is reloaded (SIGHUP), SIGKILLed once and started again, while
the database server is restarted once. The kills land on members, chain steps and
callbacks alike (every job runs in a child). Then the audit, from the ledger
(tests/apps/flows_app.py: a row per job that writes an effect, in the transaction
that completes it) and the execution log (a line per run, with whether every job
before it had ended when it started):

- every callback and chain step ran its effect exactly once (one ledger row), and
  no run of any of them started before the jobs before it had all ended;
- none started before its last member's commit (its start time is after the
  ledger's commit time of every member before it);
- none missing: every job done but the members doomed to die, every workflow ended
  (done), none waiting, ready or reserved; the counters of every workflow row equal
  its members' states.

run_workflows(db, settings, workdir, log) -> chaos.Report, like the other scenarios
of tests/chaos.py (`--scenario workflows`) and tests/soak/test_chaos.py.
"""
import json
import signal
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from chaos import Chaos, Scenario
from polling import poll_until

import prefork
from prefork.store.mysql.store import MySQLStore
from prefork.workflows.plan import plan_flow

APPS = "chaos_app,flows_app"
LIVE = ("SELECT COUNT(*) FROM prefork_jobs WHERE queue = %s"
        " AND status IN ('ready', 'reserved', 'waiting')")
JOBS = ("SELECT id, status, job_type, workflow_step, attempts, max_attempts, last_error"
        " FROM prefork_jobs WHERE queue = %s")
LEDGER = ("SELECT job_id, role, started_at, committed_at, upstream, pid FROM flow_ledger"
          " WHERE run_id = %s")
# The workflow rows of the run (through its jobs), and each one's members by state.
WORKFLOWS = ("SELECT id, parent_id, kind, state, total, done, dead, cancelled"
             " FROM prefork_workflows WHERE id IN (SELECT workflow_id FROM prefork_jobs"
             " WHERE queue = %s) OR root_id IN (SELECT workflow_id FROM prefork_jobs"
             " WHERE queue = %s)")
LEDGER_TABLE = (
    "CREATE TABLE IF NOT EXISTS flow_ledger (job_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,"
    " run_id VARCHAR(64) NOT NULL, workflow VARCHAR(64) NOT NULL, role VARCHAR(16) NOT NULL,"
    " started_at DOUBLE NOT NULL, committed_at DOUBLE NOT NULL, upstream TEXT NOT NULL,"
    " pid INT NOT NULL, KEY ix_flow_ledger_run (run_id)) ENGINE=InnoDB")
MEMBER_STATES = ("SELECT workflow_id, status, COUNT(*) FROM prefork_jobs WHERE queue = %s"
                 " AND workflow_step >= 0 GROUP BY workflow_id, status")


@dataclass
class FlowSettings:
    groups: int = 24            # a group of group_size members, then a callback
    group_size: int = 8
    chains: int = 16            # chains of chain_length steps
    chain_length: int = 4
    nested: int = 8             # a step, a group then a callback, a step; and a group of
                                # chains then a callback
    ending: int = 4             # groups whose callback waits for every member to end,
                                # one member doomed to die
    flaky: float = 0.1          # of the steps and members: their first attempt fails
    quick: float = 0.3          # of the members: no effect, completion written by the worker
    work_ms: tuple = (50.0, 400.0)
    workers: int = 6
    chaos_seconds: float = 20.0
    kill_every: tuple = (0.1, 0.3)
    hup_every: tuple = (2.0, 4.0)
    kill_supervisor_at: float = 0.6   # fraction of the chaos: SIGKILL it, start another
    db_restart_at: float = 0.3
    db_down_seconds: float = 2.0
    lease_seconds: float = 3.0
    hard_timeout: float = 5.0
    max_attempts: int = 40
    max_crashes: int = 40
    retry_base: float = 0.05
    retry_cap: float = 0.5
    graceful_timeout: float = 5.0
    restart_backoff_cap: float = 1.0
    poll_interval: float = 0.2
    drain_timeout: float = 120.0
    seed: int = None
    # What Chaos reads of the settings but the workflow scenario does not do.
    warmup_seconds: float = 3.0
    freeze_at: float = float("inf")

    @classmethod
    def full(cls):
        return cls(groups=200, group_size=50, chains=200, chain_length=10, nested=100,
                   ending=40, workers=8, chaos_seconds=240.0, drain_timeout=900.0)


class Flows:
    """The workflows of a run, as specs to enqueue and as what the audit expects."""

    def __init__(self, scenario, settings):
        self.scenario, self.settings, self.rng = scenario, settings, scenario.rng
        self.specs = []      # (name, spec)
        self.doomed = set()  # (workflow name, leaf index): members that die for good

    def job(self, name, role, doomed=False):
        quick = role == "member" and not doomed and self.rng.random() < self.settings.quick
        payload = {"run": self.scenario.run, "workflow": name, "role": role,
                   "work_ms": round(self.rng.uniform(*self.settings.work_ms), 1),
                   "flaky": not doomed and self.rng.random() < self.settings.flaky,
                   "doomed": doomed}
        return prefork.job("flow.quick" if quick else "flow.step", payload,
                           queue=self.scenario.queue, max_attempts=self.settings.max_attempts)

    def build(self):
        s = self.settings
        for number in range(s.groups):
            name = f"g{number}"
            self.specs.append((name, prefork.group(
                [self.job(name, "member") for _ in range(s.group_size)],
                then=self.job(name, "callback"))))
        for number in range(s.chains):
            name = f"c{number}"
            self.specs.append((name, prefork.chain(
                *[self.job(name, "step") for _ in range(s.chain_length)])))
        for number in range(s.nested):
            name = f"n{number}"
            self.specs.append((name, prefork.chain(
                self.job(name, "step"),
                prefork.group([self.job(name, "member") for _ in range(3)],
                              then=self.job(name, "callback")),
                self.job(name, "step"))))
            name = f"m{number}"
            self.specs.append((name, prefork.group(
                [prefork.chain(self.job(name, "step"), self.job(name, "step"))
                 for _ in range(3)], then=self.job(name, "callback"))))
        for number in range(s.ending):
            name = f"e{number}"
            self.specs.append((name, prefork.group(
                [self.job(name, "member", doomed=True)]
                + [self.job(name, "member") for _ in range(3)],
                then=self.job(name, "callback"), policy="ended")))

    def enqueue(self):
        """Enqueue them all, interleaved by kind; {job id: workflow name}."""
        self.rng.shuffle(self.specs)
        store = MySQLStore(self.scenario.db.config)
        owners = {}
        try:
            for name, spec in self.specs:
                for job_id in store.enqueue_workflow(plan_flow(spec), key=
                                                     f"{self.scenario.run}-{name}").job_ids:
                    owners[job_id] = name
        finally:
            store.close()
        return owners


class FlowChaos(Chaos):
    """scenario 1's chaos loop (kills, reloads, a database restart), and once, at
    kill_supervisor_at, a SIGKILL of the supervisor and a new one in its place."""

    def __init__(self, scenario, sup, settings):
        super().__init__(sup, scenario.db, settings, scenario.rng, scenario.log)
        self.scenario = scenario
        self.replace_at = time.monotonic() + settings.kill_supervisor_at * settings.chaos_seconds
        self.replaced = False

    def kill_one(self):
        if not self.replaced and time.monotonic() >= self.replace_at:
            self.replaced = True
            self.sup.proc.send_signal(signal.SIGKILL)   # its children quick-stop, orphaned
            self.sup.wait(10)
            self.log("SIGKILLed the supervisor; a new one takes over")
            self.sup = self.scenario.supervisor("after", self.settings.workers, apps=APPS)
            return
        super().kill_one()

    def freeze_busy_child(self):
        pass   # scenario 1 covers the hard timeout


def run_workflows(db, settings=None, workdir=None, log=None):
    """The workflow scenario; returns a chaos.Report."""
    settings = settings or FlowSettings()
    with Scenario(db, "w", "workflows: callbacks and chain steps exactly once, never early, "
                  "under kills of children and of the supervisor, reloads and a database "
                  "restart", settings, workdir, log) as scenario:
        report = scenario.report
        db.query(LEDGER_TABLE)
        flows = Flows(scenario, settings)
        flows.build()
        owners = flows.enqueue()
        report.figures.update(workflows=len(flows.specs), jobs=len(owners))
        sup = scenario.supervisor("chaos", settings.workers, apps=APPS)
        scenario.wait_ready(sup, settings.workers)
        chaos = FlowChaos(scenario, sup, settings)
        chaos.run()
        report.figures.update(kills=chaos.kills, reloads=chaos.hups,
                              supervisor_replaced=chaos.replaced,
                              database_restart="yes" if "started_at" in chaos.db_restart
                              else chaos.db_restart.get("error", "skipped"))
        if chaos.sup.alive():
            chaos.sup.signal(signal.SIGTERM)
            chaos.sup.wait(settings.graceful_timeout + settings.hard_timeout + 20)
        quiet = scenario.supervisor("quiet", settings.workers, apps=APPS)
        try:
            poll_until(lambda: not db.scalar(LIVE, (scenario.queue,)) or not quiet.alive(),
                       settings.drain_timeout, interval=0.2, message="the workflows to end")
        except TimeoutError:
            pass
        codes = scenario.stop_all()
        report.check("the quiet supervisor exited 0 on SIGTERM", codes[-1] == 0,
                     f"exit status {codes[-1]}")
        audit(report, db, scenario, flows, owners)
        scenario.check_no_leftovers()
    return report


def audit(report, db, scenario, flows, owners):
    jobs = {row[0]: row for row in db.query(JOBS, (scenario.queue,))}
    ledger = {row[0]: row for row in db.query(LEDGER, (scenario.run,))}
    runs = read_runs(scenario.exec_log)
    statuses = Counter(row[1] for row in jobs.values())
    report.figures["job statuses"] = dict(statuses)
    report.check("none lost: every job enqueued is in the table", set(jobs) == set(owners),
                 f"{len(set(owners) - set(jobs))} missing")
    dead = {job_id for job_id, row in jobs.items() if row[1] == "dead"}
    doomed = {job_id for job_id, row in jobs.items() if row[6] and "doomed" in row[6]}
    report.check("every job done but the doomed members, dead",
                 statuses["done"] + len(doomed) == len(jobs) and dead == doomed,
                 f"statuses {dict(statuses)}; {len(dead - doomed)} dead not doomed")
    with_effect = {job_id for job_id, row in jobs.items()
                   if row[2] == "flow.step" and row[1] == "done"}
    report.check("every job with an effect (callbacks, chain steps, members) wrote it "
                 "exactly once", set(ledger) == with_effect,
                 f"{len(with_effect - set(ledger))} done without their ledger row, "
                 f"{len(set(ledger) - with_effect)} rows of jobs not done")
    twice = [job_id for job_id, row in jobs.items() if row[6] and "IntegrityError" in row[6]]
    report.check("no second effect attempted (no duplicate-key failure)", not twice,
                 f"jobs {twice[:10]} hit the ledger's primary key")
    early = [run for run in runs if run[5] == "early"]
    report.check("no run started before every job before it had ended", not early,
                 f"{len(early)} early runs: {early[:5]}")
    _check_after_commits(report, jobs, ledger)
    _check_workflows(report, db, scenario)
    by_role = Counter(run[4] for run in runs)
    # A run cut short (killed, failed, given back) was followed by a later attempt.
    cut = Counter(run[4] for run in runs if run[3] < jobs[run[2]][4])
    report.figures.update(runs_by_role=dict(by_role), runs_cut_short_by_role=dict(cut))
    report.check("kills landed on members, chain steps and callbacks",
                 cut["member"] and cut["step"] and cut["callback"],
                 f"runs that did not end their job, by role: {dict(cut)}")


def read_runs(path):
    """[(time, pid, job id, attempt, role, ok|early)] of flows_app's execution log."""
    if not path.exists():
        return []
    return [(float(at), int(pid), int(job_id), int(attempt), role, verdict)
            for at, pid, job_id, attempt, role, verdict
            in (line.split() for line in path.read_text().splitlines() if line.count(" ") == 5)]


def _check_after_commits(report, jobs, ledger):
    """Each callback and chain step with an effect started after the commit of every
    job before it that wrote one (the ledger's times, this host's clock)."""
    before = []
    for job_id, row in ledger.items():
        for upstream_id in json.loads(row[4]):
            if upstream_id in ledger and ledger[upstream_id][3] > row[2]:
                before.append((job_id, upstream_id))
    report.check("none started before its last member's commit", not before,
                 f"(job, member committed after it started): {before[:5]}")


def _check_workflows(report, db, scenario):
    rows = db.query(WORKFLOWS, (scenario.queue, scenario.queue))
    states = Counter(row[3] for row in rows if row[1] is None)
    report.figures["workflow states"] = dict(states)
    report.check("every workflow ended done, none stuck", set(states) == {"done"},
                 f"outermost workflows by state: {dict(states)}")
    members = defaultdict(Counter)
    for workflow_id, status, count in db.query(MEMBER_STATES, (scenario.queue,)):
        members[workflow_id][status] += count
    for row in rows:   # nested workflows count as members of their parent, by state
        if row[1] is not None:
            members[row[1]][row[3]] += 1
    wrong = [row for row in rows if (row[5], row[6], row[7]) != tuple(
        members[row[0]][state] for state in ("done", "dead", "cancelled"))]
    report.check("every workflow's counters equal its members' states", not wrong,
                 f"{len(wrong)} differ: {wrong[:3]}")

