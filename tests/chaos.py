"""Chaos soak with a ledger: the real supervisor under SIGKILLs, SIGHUPs, a frozen
child, a database restart and a network partition, then an audit of every job.

Five scenarios, all on real processes and a real MariaDB/MySQL server:

1. chaos (one supervisor): N `chaos.ledger` jobs (tests/apps/chaos_app.py: one
   execution-log line per run, then one ledger row per idempotency key written
   in the completion transaction), mixed with N fast `chaos.plain` jobs (no
   effect: claimed in batches, their completions written with the batch's last
   job, or by the parent for a busy or dead child). While the supervisor runs with 8 workers:
   SIGKILL a random child every 100-300 ms, SIGHUP the parent every 2-4 s,
   SIGSTOP one busy child (the hard timeout must kill it and hand its job
   back), restart the database server once (stop, ~2 s down, start), then
   SIGTERM. A second, quiet supervisor then runs until the queue is empty.
   Audit: every job done, exactly one ledger row each, none lost, none
   reserved, none dead, attempts <= max_attempts, no orphan or zombie process,
   the parent's RSS after warm-up and at the end within a small bound.
2. partition (two supervisors on one database, B through tests/tcp_proxy.py):
   while both work, the proxy resets B's connections and refuses new ones for
   longer than the lease. A must recover the jobs B held once their leases
   expire; when the link returns B must recover by itself (its children
   respawn) and work again; the ledger stays exactly-once.
3. stall (two supervisors, one job): B's child is writing a slow effect inside
   job.transaction() when B's link stalls (no reset: what a vanished host looks
   like to the server). Once the job's lease has expired, A must get it back.
4. limits (tests/limits_chaos.py): jobs of a type limited per concurrency key
   while children and then the supervisor are SIGKILLed holding them: every job
   done, no key ever over its limit (from the execution log's start and end
   times), no slot left taken (the replacement supervisor finishes the rest).
6. workflows (tests/workflows_chaos.py): groups with callbacks, chains and nested
   ones under kills of children and of the supervisor, reloads and a database
   restart: every callback and chain step exactly once, none before the commits of
   the jobs before it, none missing, no workflow stuck.
5. fork (scenario 1 with --max-items 1, fewer jobs): each child is forked with a
   job the parent claimed for it and the parent writes its completion, so the
   kills land on children that hold a job they may not have started, and on
   completions only the parent knows of; the same audit.

Run it (from the repository root, after `python3 -m pip install -e '.[test]'`):

    python tests/chaos.py                        # all scenarios, CI size, on private
                                                 # throwaway MariaDB servers (needs mariadbd)
    python tests/chaos.py --full                 # full size: 20,000 jobs, 240 s of chaos
    python tests/chaos.py --jobs 20000 --chaos-seconds 300 --scenario chaos
    python tests/chaos.py --dsn mysql://root@127.0.0.1:3306/jobs --jobs 20000 \\
        --db-stop-command 'systemctl stop mariadb' --db-start-command 'systemctl start mariadb'

With --dsn the soak runs on your database (password from PREFORK_QUEUE_DB_PASSWORD):
it migrates the queue schema, creates the table `chaos_ledger`, and uses a queue
of its own (`chaos-<run id>`), so other queues are untouched; --cleanup deletes
the run's jobs and ledger rows afterwards. The database is restarted only if
you give the two commands (otherwise that step is skipped and reported). The
partition and stall scenarios need a TCP DSN (the proxy forwards to its host and port).

It prints the figures (jobs, kills, reloads, re-executions, wall time, parent
RSS) and every check, and exits 0 when all checks pass, 1 otherwise. The
working directory (supervisor logs, execution log) is kept when a check
fails, or always with --workdir.

tests/soak/test_chaos.py runs the same code under pytest (reduced size; full size
with PREFORK_SOAK_FULL=1).
"""
import argparse
import dataclasses
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
APPS = TESTS / "apps"
for _path in (str(ROOT), str(TESTS)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import psutil  # noqa: E402
import pymysql  # noqa: E402
from harness import SupervisorProcess  # noqa: E402
from polling import poll_until  # noqa: E402
from tcp_proxy import TcpProxy  # noqa: E402

from prefork import config as config_module  # noqa: E402
from prefork.jobs import new_job  # noqa: E402
from prefork.store.mysql.store import MySQLStore, parse_dsn  # noqa: E402

JOB_TYPE = "chaos.ledger"
PLAIN_JOB_TYPE = "chaos.plain"   # no effect in the completion: written with its batch's
APP_MODULE = "chaos_app"
ENQUEUE_BATCH = 1000
MIB = 1024 * 1024
PASSWORD_VARIABLES = ("PREFORK_QUEUE_DB_PASSWORD", "PREFORK_QUEUE_DB_PASSWORD_FILE")

LEDGER_TABLE = (
    "CREATE TABLE IF NOT EXISTS chaos_ledger ("
    " idempotency_key VARCHAR(191) NOT NULL PRIMARY KEY,"
    " run_id VARCHAR(64) NOT NULL, job_id BIGINT UNSIGNED NOT NULL,"
    " attempt INT UNSIGNED NOT NULL, pid INT NOT NULL, written_at DATETIME(6) NOT NULL,"
    " KEY ix_chaos_ledger_run (run_id)) ENGINE=InnoDB")

UNFINISHED = ("SELECT COUNT(*) FROM prefork_jobs WHERE queue = %s"
              " AND status IN ('ready', 'reserved')")
DONE_COUNT = "SELECT COUNT(*) FROM prefork_jobs WHERE queue = %s AND status = 'done'"
JOB_ROWS = ("SELECT id, idempotency_key, status, attempts, max_attempts, crashes, last_error"
            " FROM prefork_jobs WHERE queue = %s")
LEDGER_ROWS = ("SELECT idempotency_key, job_id, attempt, pid FROM chaos_ledger"
               " WHERE run_id = %s")
DELETE_JOBS = "DELETE FROM prefork_jobs WHERE queue = %s LIMIT 10000"
DELETE_LEDGER = "DELETE FROM chaos_ledger WHERE run_id = %s LIMIT 10000"

BUSY_TITLE = re.compile(r" busy job (\d+) ")


# --- settings ----------------------------------------------------------------------------


def assert_report(report):
    """Every check of the scenario passed; the failed ones are named otherwise."""
    print(report.text())   # the figures, shown with -s or on failure
    failed = report.failed()
    assert not failed, (
        "\n".join(f"{check.name}: {check.detail}" for check in failed)
        + f"\n(logs in {report.workdir})\n" + report.text())

@dataclass
class SoakSettings:
    """Scenario 1. Chaos must never exhaust a job: max_attempts and max_crashes are
    high because the kills are not the job's fault."""
    jobs: int = 600
    plain_jobs: int = 600                 # fast jobs without an effect, claimed in batches
    plain_work_ms: tuple = (0.0, 2.0)
    workers: int = 8
    chaos_seconds: float = 20.0
    lease_seconds: float = 3.0
    hard_timeout: float = 3.0
    max_attempts: int = 20
    max_crashes: int = 20
    retry_base: float = 0.05
    retry_cap: float = 1.0
    graceful_timeout: float = 5.0
    restart_backoff_cap: float = 1.0
    poll_interval: float = 0.2
    kill_every: tuple = (0.1, 0.3)        # seconds between SIGKILLs of a random child
    hup_every: tuple = (2.0, 4.0)         # seconds between SIGHUPs of the parent
    warmup_seconds: float = 3.0           # the parent's first RSS sample
    freeze_at: float = 4.0                # seconds into the chaos: SIGSTOP a busy child
    db_restart_at: float = 0.4            # fraction of the chaos: stop the database
    db_down_seconds: float = 2.0
    rss_bound_mib: float = 20.0
    drain_timeout: float = 60.0           # the quiet supervisor must empty the queue in this
    seed: int = None
    max_items: int = 0                    # 1: scenario 5, a child forked per job

    @classmethod
    def full(cls):
        return cls(jobs=20000, plain_jobs=20000, chaos_seconds=240.0, drain_timeout=600.0)

    @classmethod
    def fork_per_job(cls, full=False):
        """Scenario 5: a process per job runs some 150 jobs/s here, so fewer jobs."""
        if full:
            return cls(jobs=3000, plain_jobs=3000, chaos_seconds=120.0, drain_timeout=300.0,
                       max_items=1)
        return cls(jobs=200, plain_jobs=200, chaos_seconds=15.0, max_items=1)

    def work_ms(self):
        """(low, high) handler work in ms: about 80% of the chaos window to get through
        the queue with no chaos, so the chaos hits a pool that is busy to the end."""
        mean = self.workers * 0.8 * self.chaos_seconds / self.jobs * 1000.0
        mean = min(mean, self.hard_timeout * 1000.0 / 4)
        return 0.2 * mean, 1.8 * mean


@dataclass
class PartitionSettings:
    """Scenario 2: two supervisors, B cut off for longer than the lease."""
    jobs: int = 240
    late_jobs: int = 60                   # enqueued once the link is back
    workers: int = 4                      # per supervisor
    lease_seconds: float = 3.0
    cut_after: float = 3.0                # seconds of normal work before the cut
    cut_seconds: float = 8.0              # > lease + a recovery interval (lease / 2)
    work_ms: tuple = (100.0, 500.0)
    max_attempts: int = 20
    max_crashes: int = 20
    retry_base: float = 0.05
    retry_cap: float = 1.0
    graceful_timeout: float = 5.0
    restart_backoff_cap: float = 1.0
    poll_interval: float = 0.2
    drain_timeout: float = 60.0
    seed: int = None

    @classmethod
    def full(cls):
        return cls(jobs=3000, late_jobs=600, cut_after=20.0, cut_seconds=15.0,
                   drain_timeout=300.0)


@dataclass
class StallSettings:
    """Scenario 3: B's link stalls while its child is inside job.transaction()."""
    lease_seconds: float = 3.0
    tx_work_ms: float = 2000.0            # the slow effect B's child is writing
    stall_seconds: float = 12.0           # > lease + a recovery interval, < read_timeout
    max_attempts: int = 20
    max_crashes: int = 20
    retry_base: float = 0.05
    retry_cap: float = 1.0
    graceful_timeout: float = 5.0
    restart_backoff_cap: float = 1.0
    poll_interval: float = 0.2
    drain_timeout: float = 30.0
    seed: int = None


# --- the database ------------------------------------------------------------------------

class Database:
    """The database under test: queries for the audit, and how to restart its server."""

    def __init__(self, dsn, server=None, environ=None):
        self.dsn = dsn
        self.environ = {key: value for key, value in
                        (os.environ if environ is None else environ).items()
                        if key in PASSWORD_VARIABLES}
        self.config = config_module.load({"dsn": dsn}, environ=self.environ)
        # The soak's database is one server: its first (only) host.
        args = parse_dsn(dsn)
        (host, port), *_ = args.pop("hosts")
        self.args = {**args, "host": host, "port": port}
        # Has stop() and start(): a ThrowawayMariaDB or a CommandServer. None: the
        # soak cannot restart the server and skips that step. Both are called from
        # the main thread: a throwaway server dies with the thread that started it.
        self.server = server

    def proxy(self):
        """A started TcpProxy in front of the server (a TCP DSN is needed)."""
        if self.args.get("unix_socket"):
            raise ValueError("the proxy scenarios need a TCP DSN (host:port)")
        return TcpProxy(self.args["host"], self.args["port"]).start()

    def via(self, proxy):
        """The DSN of the same database through the proxy."""
        return f"mysql://{self.args['user']}@127.0.0.1:{proxy.port}/{self.args['database']}"

    def connect(self):
        args = {key: value for key, value in self.args.items() if value is not None}
        return pymysql.connect(password=self.config.password() or "", autocommit=True,
                               connect_timeout=5, charset="utf8mb4", **args)

    def query(self, sql, args=None):
        """Rows of one statement, on a connection of its own (the server may have restarted)."""
        return self._execute(sql, args)[1]

    def _execute(self, sql, args):
        conn = self.connect()
        try:
            with conn.cursor() as cursor:
                count = cursor.execute(sql, args)
                return count, cursor.fetchall()
        finally:
            conn.close()

    def scalar(self, sql, args=None):
        return self.query(sql, args)[0][0]

    def prepare(self):
        """The queue schema (safe if it is there) and the ledger table."""
        store = MySQLStore(self.config)
        try:
            store.migrate()
        finally:
            store.close()
        self.query(LEDGER_TABLE)

    def enqueue(self, run, queue, count, work_ms, max_attempts, rng, first=0, extra=None,
                job_type=JOB_TYPE):
        """count jobs with keys <run>-<n> (<run>-p<n> for plain jobs); returns the keys.
        extra: more payload."""
        store = MySQLStore(self.config)
        keys = []
        try:
            for start in range(first, first + count, ENQUEUE_BATCH):
                batch = []
                for number in range(start, min(first + count, start + ENQUEUE_BATCH)):
                    key = f"{run}-{'p' if job_type == PLAIN_JOB_TYPE else ''}{number:07d}"
                    keys.append(key)
                    payload = {"run": run, "work_ms": round(rng.uniform(*work_ms), 1),
                               **(extra or {})}
                    batch.append(new_job(job_type, payload, queue=queue, key=key,
                                         max_attempts=max_attempts))
                added = store.enqueue_many(batch)
                if added != len(batch):
                    raise RuntimeError(f"enqueued {added} of {len(batch)} new jobs")
        finally:
            store.close()
        return keys

    def lock_holders(self):
        """Server threads whose open InnoDB transaction holds row locks (needs the
        PROCESS privilege; an empty set without it)."""
        try:
            return {row[0] for row in self.query(
                "SELECT trx_mysql_thread_id FROM information_schema.innodb_trx"
                " WHERE trx_rows_locked > 0")}
        except pymysql.err.MySQLError:
            return set()

    def unfinished(self, queue):
        return self.scalar(UNFINISHED, (queue,))

    def cleanup(self, run, queue):
        """Delete the run's jobs and ledger rows, in chunks."""
        for sql, value in ((DELETE_JOBS, queue), (DELETE_LEDGER, run)):
            while self._execute(sql, (value,))[0]:
                pass


class CommandServer:
    """A server the user runs, stopped and started with their own commands."""

    def __init__(self, stop_command, start_command):
        self.stop_command, self.start_command = stop_command, start_command

    def stop(self):
        subprocess.run(shlex.split(self.stop_command), check=True, timeout=120)

    def start(self):
        subprocess.run(shlex.split(self.start_command), check=True, timeout=120)


# --- the supervisor as a process -------------------------------------------------------------

class Supervisor(SupervisorProcess):
    """The tests' supervisor process (tests/harness.py), with what the soak asks of it."""

    # The soak stops a supervisor at any moment, also within milliseconds of starting
    # it (the quiet one, when the chaos left nothing to do): before the interpreter has
    # run our first line, only a blocked signal waits for the supervisor to catch it.
    block_stop_signals_at_start = True

    def __init__(self, workdir, name, dsn, args, environ):
        super().__init__(Path(workdir), dsn, *args, env=environ, name=name, cwd=ROOT)

    @property
    def unreadable_lines(self):
        return self.log.unreadable_lines

    def alive(self):
        return self.proc.poll() is None

    def rss(self):
        return psutil.Process(self.pid).memory_info().rss

    def wait(self, timeout):
        """Its exit status, or None when it is still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def spawned_pids(self):
        return {e["pid"] for e in self.events("worker_spawned")}


def supervisor_args(settings, queue, workers):
    args = ["--app", APP_MODULE, "--queues", queue, "--workers", str(workers),
            "--lease-seconds", str(settings.lease_seconds),
            "--max-attempts", str(settings.max_attempts),
            "--max-crashes", str(settings.max_crashes),
            "--retry-base", str(settings.retry_base), "--retry-cap", str(settings.retry_cap),
            "--graceful-timeout", str(settings.graceful_timeout),
            "--restart-backoff-cap", str(settings.restart_backoff_cap),
            "--poll-interval", str(settings.poll_interval)]
    hard_timeout = getattr(settings, "hard_timeout", None)
    if hard_timeout:
        args += ["--hard-timeout", str(hard_timeout)]
    if getattr(settings, "max_items", 0):
        args += ["--max-items", str(settings.max_items)]
    return args


def gone(pid):
    """The process ended (a zombie has ended too: only its parent's wait() is missing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def title_of(process):
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


# --- results --------------------------------------------------------------------------------

@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


class Report:
    """What a scenario measured (figures) and what it verified (checks)."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.figures = {}
        self.checks = []
        self.workdir = None

    def check(self, name, ok, detail=""):
        self.checks.append(Check(name, bool(ok), detail if not ok else ""))

    def failed(self):
        return [check for check in self.checks if not check.ok]

    def text(self):
        lines = [f"== {self.scenario}"]
        lines += [f"   {key}: {value}" for key, value in self.figures.items()]
        for check in self.checks:
            mark = "ok  " if check.ok else "FAIL"
            detail = f": {check.detail}" if check.detail else ""
            lines.append(f"   [{mark}] {check.name}{detail}")
        return "\n".join(lines)


def audit_ledger(report, db, run, queue, keys, plain_keys=()):
    """The ledger checks shared by the scenarios: every job done, a ledger job's
    effect exactly once. Plain jobs (no effect) count in every check but the ledger's."""
    jobs = db.query(JOB_ROWS, (queue,))
    ledger = db.query(LEDGER_ROWS, (run,))
    by_key = {row[1]: row for row in jobs}
    all_keys = list(keys) + list(plain_keys)
    statuses = Counter(row[2] for row in jobs)
    report.figures["job statuses"] = dict(statuses)
    report.figures["max attempts used"] = max((row[3] for row in jobs), default=0)
    report.figures["max crashes"] = max((row[5] for row in jobs), default=0)
    missing = sorted(set(all_keys) - set(by_key))
    report.check("none lost: every enqueued job is in the table",
                 not missing and len(jobs) == len(all_keys),
                 f"{len(missing)} keys missing (first {missing[:5]}); {len(jobs)} rows "
                 f"for {len(all_keys)} keys")
    reserved = [row[0] for row in jobs if row[2] == "reserved"]
    report.check("none stuck reserved", not reserved, f"{len(reserved)} reserved: {reserved[:10]}")
    dead = [(row[0], row[6]) for row in jobs if row[2] == "dead"]
    report.check("none dead", not dead, f"{len(dead)} dead: {dead[:10]}")
    not_done = [row[0] for row in jobs if row[2] != "done"]
    report.check("every job done", not not_done and statuses["done"] == len(all_keys),
                 f"{len(not_done)} not done: {not_done[:10]}")
    over = [(row[0], row[3], row[4]) for row in jobs if row[3] > row[4]]
    report.check("attempts never exceed max_attempts", not over,
                 f"(id, attempts, max): {over[:10]}")
    ledger_keys = Counter(row[0] for row in ledger)
    wrong_job = [key for key, job_id, _, _ in ledger
                 if key not in by_key or by_key[key][0] != job_id]
    no_effect = [key for key in keys if key in by_key and by_key[key][2] == "done"
                 and key not in ledger_keys]
    report.check("ledger exactly once: one row per job, none extra",
                 len(ledger) == len(keys) and set(ledger_keys) == set(keys) and not wrong_job
                 and not no_effect,
                 f"{len(ledger)} ledger rows for {len(keys)} jobs; {len(wrong_job)} rows of "
                 f"another job; {len(no_effect)} done jobs without their effect "
                 f"(first {no_effect[:5]})")
    duplicate_effects = [row[0] for row in jobs if row[6] and "IntegrityError" in row[6]]
    report.check("no second effect attempted (no duplicate-key failure)",
                 not duplicate_effects, f"jobs {duplicate_effects[:10]} hit the ledger's "
                 "primary key: a second completion tried to write the effect again")
    return {row[0]: row for row in jobs}, {row[0]: row for row in ledger}


def read_exec_log(path):
    """[(time, pid, job_id, attempt, key)] from the handler's execution log."""
    runs = []
    if not Path(path).exists():
        return runs
    with open(path) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 5:
                runs.append((float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]),
                             parts[4]))
    return runs


def count_reexecutions(report, exec_runs):
    per_key = Counter(run[4] for run in exec_runs)
    again = {key: count for key, count in per_key.items() if count > 1}
    report.figures["handler executions"] = len(exec_runs)
    report.figures["jobs executed more than once"] = len(again)
    report.figures["most executions of one job"] = max(per_key.values(), default=0)


def leftover_processes(marker, known_pids):
    """Processes of ours still around: any whose command line carries our marker (the
    run's queue name is in every title), and any pid we saw that is a zombie or still
    a prefork-queue process. Other users' prefork-queue processes are not ours."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        info = process.info
        command = " ".join(info.get("cmdline") or [])
        if process.pid == os.getpid():
            continue
        if marker in command or (process.pid in known_pids and (
                info.get("status") == psutil.STATUS_ZOMBIE or "prefork" in command)):
            found.append((process.pid, info.get("status"), command[:120]))
    return found


def check_no_leftovers(report, marker, known_pids, timeout=10.0):
    try:
        poll_until(lambda: not leftover_processes(marker, known_pids), timeout, interval=0.1,
                   message="our processes to end")
        left = []
    except TimeoutError:
        left = leftover_processes(marker, known_pids)
    report.check("no orphan or zombie process", not left, f"still there: {left[:10]}")


class Scenario:
    """What every scenario shares: a run id and its own queue, a work directory, the
    handler's execution log, and the supervisors it starts, all killed on exit
    whatever happened. Use as a context manager; `report` is the result."""

    def __init__(self, db, letter, title, settings, workdir=None, log=None):
        self.db, self.settings = db, settings
        self.log = log or (lambda text: None)
        self.rng = random.Random(settings.seed)
        self.report = Report(title)
        self.workdir = self.report.workdir = Path(workdir or tempfile.mkdtemp(prefix="pq-soak-"))
        self.run = f"{letter}{uuid.uuid4().hex[:10]}"
        self.queue = f"chaos-{self.run}"
        self.exec_log = self.workdir / f"{self.run}-executions.log"
        self.environ = dict(db.environ, CHAOS_EXEC_LOG=str(self.exec_log))
        self.supervisors = []
        self.started = time.monotonic()
        self.report.figures["run"] = self.run

    def __enter__(self):
        self.db.prepare()
        return self

    def __exit__(self, *exc_info):
        for sup in self.supervisors:
            sup.kill_all()
        self.report.figures["wall time (s)"] = round(time.monotonic() - self.started, 1)

    def enqueue(self, count, work_ms, first=0, extra=None, job_type=JOB_TYPE):
        return self.db.enqueue(self.run, self.queue, count, work_ms, self.settings.max_attempts,
                               self.rng, first=first, extra=extra, job_type=job_type)

    def supervisor(self, name, workers, dsn=None, apps=APP_MODULE):
        args = supervisor_args(self.settings, self.queue, workers)
        args[args.index("--app") + 1] = apps
        sup = Supervisor(self.workdir, f"{self.run}-{name}", dsn or self.db.dsn, args,
                         self.environ)
        self.supervisors.append(sup)
        return sup

    def wait_ready(self, sup, workers):
        poll_until(lambda: len(sup.events("worker_ready")) >= workers or not sup.alive(), 30,
                   message=f"{workers} children of {sup.name} ready")

    def stop_all(self):
        """SIGTERM every supervisor still running; their exit statuses."""
        for sup in self.supervisors:
            if sup.alive():
                sup.signal(signal.SIGTERM)
        return [sup.wait(self.settings.graceful_timeout + 20) for sup in self.supervisors]

    def executions(self):
        return read_exec_log(self.exec_log)

    def spawned(self):
        return set().union(*(sup.spawned_pids() for sup in self.supervisors))

    def check_no_leftovers(self):
        check_no_leftovers(self.report, self.queue,
                           {sup.pid for sup in self.supervisors} | self.spawned())


# --- scenario 1: chaos ------------------------------------------------------------------------

class Chaos:
    """The time-bounded chaos loop against one running supervisor."""

    def __init__(self, sup, db, settings, rng, log):
        self.sup, self.db, self.settings, self.rng, self.log = sup, db, settings, rng, log
        self.kills = self.hups = 0
        self.kill_misses = 0
        self.frozen = None            # {"pid", "job_id", "at"} of the SIGSTOPped child
        self.frozen_gone_at = None
        self.db_restart = {}          # "stopped_at", "started_at", "error"
        self.rss_start = self.rss_end = None
        self.rss_max = 0
        self.parent_died = None

    def run(self):
        s = self.settings
        start = time.monotonic()
        end = start + s.chaos_seconds
        next_kill = start + self.rng.uniform(*s.kill_every)
        next_hup = start + self.rng.uniform(*s.hup_every)
        next_rss = start
        freeze_at = start + s.freeze_at
        db_stop_at = start + s.db_restart_at * s.chaos_seconds if self.db.server else None
        db_start_at = None
        warm_at = start + s.warmup_seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if not self.sup.alive():
                self.parent_died = self.sup.proc.returncode
                self.log(f"the supervisor died during the chaos: {self.parent_died}")
                break
            if now >= next_kill:
                self.kill_one()
                next_kill = now + self.rng.uniform(*s.kill_every)
            if now >= next_hup:
                self.sup.signal(signal.SIGHUP)
                self.hups += 1
                next_hup = now + self.rng.uniform(*s.hup_every)
            if self.frozen is None and now >= freeze_at:
                self.freeze_busy_child()
            elif self.frozen and self.frozen_gone_at is None and gone(self.frozen["pid"]):
                self.frozen_gone_at = time.monotonic()
            if db_stop_at and now >= db_stop_at:
                db_stop_at = None
                if self._database("stop", "stopped_at"):
                    db_start_at = time.monotonic() + s.db_down_seconds
            if db_start_at and now >= db_start_at:
                db_start_at = None
                self._database("start", "started_at")
            if now >= next_rss:
                self.sample_rss(now >= warm_at)
                next_rss = now + 0.5
            wake = min(t for t in (next_kill, next_hup, next_rss, end, db_stop_at, db_start_at)
                       if t)
            time.sleep(max(0.0, min(wake - time.monotonic(), 0.05)))
        if db_start_at:   # a chaos window too short for the downtime: start it anyway
            self._database("start", "started_at")
        if self.frozen and self.frozen_gone_at is None and gone(self.frozen["pid"]):
            self.frozen_gone_at = time.monotonic()
        self.rss_end = self.sample_rss(True)

    def sample_rss(self, warm):
        try:
            rss = self.sup.rss()
        except psutil.Error:
            return
        if warm and self.rss_start is None:
            self.rss_start = rss
        self.rss_max = max(self.rss_max, rss)
        return rss

    def kill_one(self):
        frozen_pid = self.frozen["pid"] if self.frozen else None
        candidates = [child for child in self.sup.children() if child.pid != frozen_pid]
        if not candidates:
            self.kill_misses += 1
            return
        victim = self.rng.choice(candidates)
        try:
            victim.send_signal(signal.SIGKILL)
            self.kills += 1
        except psutil.Error:
            self.kill_misses += 1

    def freeze_busy_child(self):
        """SIGSTOP a child that runs a job the parent knows about: its title says busy
        and its job_claimed event (logged after it told the parent) is out."""
        children = self.sup.children()
        self.rng.shuffle(children)
        for child in children:
            if not BUSY_TITLE.search(title_of(child)):
                continue
            try:
                child.send_signal(signal.SIGSTOP)
            except psutil.Error:
                continue
            stopped_at = time.monotonic()
            busy = BUSY_TITLE.search(title_of(child))   # it cannot change now
            if busy and self.sup.events("job_claimed", pid=child.pid, job_id=int(busy.group(1))):
                self.frozen = {"pid": child.pid, "job_id": int(busy.group(1)), "at": stopped_at}
                self.log(f"SIGSTOP child {child.pid} running job {busy.group(1)}")
                return
            try:
                child.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass

    def _database(self, action, mark):
        """Stop or start the database server; True when it worked."""
        self.log(f"database: {action}")
        try:
            getattr(self.db.server, action)()
        except Exception as exc:   # reported as a failed check, not a crash of the soak
            self.db_restart["error"] = f"{action}: {type(exc).__name__}: {exc}"
            return False
        self.db_restart[mark] = time.time()
        return True


def check_frozen_child(report, sup, chaos, jobs, ledger, exec_runs):
    """The SIGSTOPped child was killed by the hard timeout, and its job handed back
    (unless the child had written the job's effect, or committed a plain job's
    completion, just before it froze: its title says busy until it logs the outcome)."""
    frozen = chaos.frozen
    report.check("one busy child was frozen with SIGSTOP", frozen, "no busy child to freeze")
    if not frozen:
        return
    exits = sup.events("worker_exited", pid=frozen["pid"])
    reason = exits[0].get("reason", "") if exits else ""
    frozen_for = chaos.frozen_gone_at - frozen["at"] if chaos.frozen_gone_at else None
    # Its exit reason proves what killed it; how soon depends on the machine's load.
    report.check("the hard timeout killed the frozen child",
                 reason.startswith("hard timeout") and frozen_for is not None,
                 f"exit event {exits[:1]}, gone {frozen_for} s after the SIGSTOP")
    key = jobs[frozen["job_id"]][1] if frozen["job_id"] in jobs else None
    row = jobs.get(frozen["job_id"])
    runs = [run[1] for run in exec_runs if run[2] == frozen["job_id"]]
    # A plain job leaves no effect: done after one run, in the frozen child, means its
    # completion was committed before the SIGSTOP (a frozen handler would have run again).
    finished_by_it = (key in ledger and ledger[key][3] == frozen["pid"]) or (
        key not in ledger and row is not None and row[2] == "done"
        and runs == [frozen["pid"]])
    handed = [e for e in sup.events("job_handed_back", job_id=frozen["job_id"])
              if e.get("cause", "").startswith("hard timeout")]
    report.check("the frozen child's job was handed back", handed or finished_by_it,
                 f"job {frozen['job_id']}: no job_handed_back event with a hard-timeout cause")
    report.figures["frozen child"] = (
        f"pid {frozen['pid']}, job {frozen['job_id']}, killed "
        f"{'?' if frozen_for is None else round(frozen_for, 2)} s after SIGSTOP, "
        f"job handed back: {bool(handed)}")


def check_parent_rss(report, chaos, settings):
    start, end = chaos.rss_start, chaos.rss_end
    shown = [f"{value / MIB:.1f}" if value else "?" for value in (start, end, chaos.rss_max)]
    report.figures["parent RSS (MiB) after warm-up / end / max"] = " / ".join(shown)
    report.check(f"the parent's RSS grew by at most {settings.rss_bound_mib:g} MiB",
                 start and end and end - start <= settings.rss_bound_mib * MIB,
                 f"{shown[0]} MiB after warm-up, {shown[1]} MiB at the end")


def enqueue_mixed(scenario, settings, chunk=50):
    """Ledger and plain jobs in alternating chunks, so that fast batches and slow
    jobs meet all through the run; (ledger keys, plain keys)."""
    keys, plain_keys = [], []
    for first in range(0, max(settings.jobs, settings.plain_jobs), chunk):
        keys += scenario.enqueue(max(0, min(chunk, settings.jobs - first)), settings.work_ms(),
                                 first=first)
        plain_keys += scenario.enqueue(max(0, min(chunk, settings.plain_jobs - first)),
                                       settings.plain_work_ms, first=first,
                                       job_type=PLAIN_JOB_TYPE)
    return keys, plain_keys


def run_chaos(db, settings=None, workdir=None, log=None):
    """Scenario 1; returns a Report."""
    settings = settings or SoakSettings()
    forked = " (a child forked per job, --max-items 1)" if settings.max_items == 1 else ""
    with Scenario(db, "f" if forked else "c", f"chaos{forked}: one supervisor, kills, reloads, "
                  "a frozen child, a database restart", settings, workdir, log) as scenario:
        report, queue = scenario.report, scenario.queue
        keys, plain_keys = enqueue_mixed(scenario, settings)
        report.figures.update(jobs=settings.jobs, plain_jobs=settings.plain_jobs,
                              workers=settings.workers,
                              work_ms=tuple(round(x) for x in settings.work_ms()))
        scenario.log(f"enqueued {settings.jobs} ledger and {settings.plain_jobs} plain jobs "
                     f"on queue {queue}")
        sup = scenario.supervisor("chaos", settings.workers)
        scenario.wait_ready(sup, settings.workers)
        chaos = Chaos(sup, db, settings, scenario.rng, scenario.log)
        scenario.log(f"chaos for {settings.chaos_seconds:g} s")
        chaos.run()
        done_in_chaos = db.scalar(DONE_COUNT, (queue,))
        report.check("the parent survived the chaos", chaos.parent_died is None and sup.alive(),
                     f"exit status {chaos.parent_died}")
        if sup.alive():
            sup.signal(signal.SIGTERM)
        drained = sup.wait(settings.graceful_timeout + settings.hard_timeout + 20)
        report.check("SIGTERM drained the pool and the parent exited 0", drained == 0,
                     f"exit status {drained}")
        scenario.log(f"chaos over: {done_in_chaos} done, exit {drained}")
        if db.server:
            report.check("the database was restarted during the chaos",
                         "started_at" in chaos.db_restart and "error" not in chaos.db_restart,
                         chaos.db_restart.get("error", "the restart did not finish"))
        report.figures.update(
            kills=chaos.kills, kill_misses=chaos.kill_misses, reloads=chaos.hups,
            database_restart="yes" if "started_at" in chaos.db_restart else
            ("skipped (no restart commands)" if not db.server else "failed"),
            done_during_chaos=done_in_chaos,
            hand_backs=len(sup.events("job_handed_back")),
            completions_written_by_the_parent=len(sup.events("job_completed_by_supervisor")),
            leases_recovered=sum(e.get("count", 0) for e in sup.events("leases_recovered")),
            worker_exits=len(sup.events("worker_exited")),
            restart_backoffs=len(sup.events("restart_backoff")))

        # A quiet supervisor finishes what the chaos left.
        quiet = scenario.supervisor("quiet", settings.workers)
        try:
            poll_until(lambda: (not db.unfinished(queue)) or not quiet.alive(),
                       settings.drain_timeout, interval=0.2, message="the queue to empty")
        except TimeoutError:
            pass
        report.check("a quiet supervisor emptied the queue", not db.unfinished(queue),
                     f"{db.unfinished(queue)} jobs still ready or reserved; the supervisor "
                     + ("is still running" if quiet.alive() else
                        f"exited {quiet.proc.returncode}: {quiet.log_tail(300)!r}"))
        code = scenario.stop_all()[-1]
        report.check("the quiet supervisor exited 0 on SIGTERM", code == 0, f"exit status {code}")

        jobs, ledger = audit_ledger(report, db, scenario.run, queue, keys, plain_keys)
        check_frozen_child(report, sup, chaos, jobs, ledger, scenario.executions())
        count_reexecutions(report, scenario.executions())
        check_parent_rss(report, chaos, settings)
        scenario.check_no_leftovers()
        report.figures["unreadable log lines"] = sum(
            sup.unreadable_lines for sup in scenario.supervisors)
    return report


# --- scenario 2: partition ---------------------------------------------------------------------

def run_partition(db, settings=None, workdir=None, log=None):
    """Scenario 2; returns a Report."""
    settings = settings or PartitionSettings()
    with Scenario(db, "p", "partition: two supervisors, B cut off from the database for "
                  "longer than the lease", settings, workdir, log) as scenario:
        report, queue = scenario.report, scenario.queue
        keys = scenario.enqueue(settings.jobs, settings.work_ms)
        report.figures.update(jobs=settings.jobs + settings.late_jobs,
                              workers=f"{settings.workers} + {settings.workers}")
        proxy = db.proxy()
        try:
            a = scenario.supervisor("A", settings.workers)
            b = scenario.supervisor("B", settings.workers, dsn=db.via(proxy))
            for sup in (a, b):
                scenario.wait_ready(sup, settings.workers)
            time.sleep(settings.cut_after)   # both work for a while (the soak's own pace)
            poll_until(lambda: [c for c in b.children() if BUSY_TITLE.search(title_of(c))],
                       10, interval=0.01, message="B holding a job")
            cut_at = time.time()
            dropped = proxy.cut()
            scenario.log(f"link of B cut ({dropped} connections reset)")
            both_alive = True
            deadline = time.monotonic() + settings.cut_seconds
            while time.monotonic() < deadline:
                both_alive = both_alive and a.alive() and b.alive()
                time.sleep(0.05)
            restore_at = time.time()
            proxy.restore()
            scenario.log("link of B restored")
            keys += scenario.enqueue(settings.late_jobs, settings.work_ms, first=settings.jobs)
            try:
                poll_until(lambda: not db.unfinished(queue) or not (a.alive() or b.alive()),
                           settings.drain_timeout, interval=0.2, message="the queue to empty")
            except TimeoutError:
                pass
            both_alive = both_alive and a.alive() and b.alive()
        finally:
            proxy.close()
        report.check("both parents survived the partition", both_alive,
                     f"A: {a.proc.poll()}, B: {b.proc.poll()}")
        report.check("the two supervisors emptied the queue", not db.unfinished(queue),
                     f"{db.unfinished(queue)} jobs ready or reserved")
        codes = scenario.stop_all()
        report.check("both exited 0 on SIGTERM", codes == [0, 0], f"exit statuses {codes}")
        jobs, ledger = audit_ledger(report, db, scenario.run, queue, keys)
        exec_runs = scenario.executions()
        count_reexecutions(report, exec_runs)
        report.figures["connections_reset"] = dropped
        check_partition_recovery(report, a, b, jobs, ledger, exec_runs, cut_at, restore_at)
        scenario.check_no_leftovers()
    return report


def check_partition_recovery(report, a, b, jobs, ledger, exec_runs, cut_at, restore_at):
    """A took back the jobs B held at the cut (lease expiry), and B worked again after."""
    pids_a, pids_b = a.spawned_pids(), b.spawned_pids()
    # B was really cut off: its parent lost the database, its busy children died.
    b_db_errors = [e for e in b.events() if e.get("event") in (
        "supervisor_db_error", "supervisor_db_unavailable", "worker_fatal",
        "worker_boot_failed")]
    report.check("B noticed the cut (database errors in its log)", b_db_errors,
                 "no database error in B's log")
    # The jobs B held at the cut: B ran them last before the link came back, and the
    # child that ran them did not write their effect. Cut off, B could claim nothing:
    # a job it started during the cut was claimed before it, in a batch, and held.
    last_before_restore = {}
    for when, pid, job_id, _, key in exec_runs:
        if when < restore_at:
            last_before_restore[job_id] = (when, pid, key)
    held = {job_id: (when, pid, key) for job_id, (when, pid, key)
            in last_before_restore.items()
            if pid in pids_b and key in ledger and ledger[key][3] != pid}
    # A's periodic lease recovery returned them while B was still cut off: each came
    # back through recover_expired (last_error 'lease expired'), not a hand-back.
    recovered_in_cut = sum(e.get("count", 0) for e in a.events("leases_recovered")
                           if cut_at <= _event_time(e) < restore_at)
    expired = [job_id for job_id in held if jobs.get(job_id)
               and jobs[job_id][6] == "lease expired"]
    rerun_by = Counter("A" if ledger[key][3] in pids_a else "B" for _, _, key in held.values())
    first_rerun = [min((r[0] for r in exec_runs if r[2] == job_id and r[0] >= cut_at),
                       default=None) for job_id in held]
    report.figures.update(
        jobs_held_by_B_at_cut=len(held), leases_recovered_by_A_during_cut=recovered_in_cut,
        held_jobs_finished_by=dict(rerun_by),
        held_jobs_rerun_after_cut_s=sorted(round(t - cut_at, 1) for t in first_rerun
                                           if t is not None))
    report.check("B held jobs when it was cut off", held, "B held no job at the cut")
    report.check("A recovered B's jobs once their leases expired, while B was cut off",
                 held and len(expired) == len(held) and recovered_in_cut >= len(held),
                 f"held {sorted(held)}; back through lease expiry {sorted(expired)};"
                 f" A recovered {recovered_in_cut} leases during the cut")
    b_ready_after = [e for e in b.events("worker_ready") if _event_time(e) >= restore_at]
    b_done_after = {key for when, pid, _, _, key in exec_runs
                    if pid in pids_b and when >= restore_at and key in ledger
                    and ledger[key][3] == pid}
    report.figures.update(B_children_ready_after_restore=len(b_ready_after),
                          B_jobs_done_after_restore=len(b_done_after))
    report.check("B recovered by itself: fresh children, jobs done after the link returned",
                 b_ready_after and b_done_after,
                 f"{len(b_ready_after)} B children ready and {len(b_done_after)} jobs done "
                 "by B after the restore")


# --- scenario 3: a stalled link ---------------------------------------------------------------

def run_stall(db, settings=None, workdir=None, log=None):
    """Scenario 3; returns a Report. B's child is writing a slow effect inside
    job.transaction() (so its session holds the job row's lock) when B's link stalls:
    no reset, no FIN, as when B's host vanishes. The job's lease runs out; the
    contract says A gets it back then."""
    settings = settings or StallSettings()
    with Scenario(db, "s", "stall: B's link stalls, no reset, while its child holds a job's "
                  "row lock inside job.transaction()", settings, workdir, log) as scenario:
        report, queue = scenario.report, scenario.queue
        proxy = db.proxy()
        try:
            b = scenario.supervisor("B", 1, dsn=db.via(proxy))
            scenario.wait_ready(b, 1)
            keys = scenario.enqueue(1, (0, 0), extra={"tx_work_ms": settings.tx_work_ms})
            ran = poll_until(scenario.executions, 15, message="B running the job")
            # The effect takes tx_work_ms inside the transaction; a moment in, the row is locked.
            poll_until(lambda: time.time() >= ran[0][0] + 0.3, 5, interval=0.01)
            proxy.stall()
            scenario.log("B's link stalled inside the completion transaction")
            a = scenario.supervisor("A", 1)
            expired_since, lockers, status = None, set(), None
            deadline = time.monotonic() + settings.stall_seconds
            while status != "done" and time.monotonic() < deadline:
                status, expired = db.query("SELECT status, lease_until <= UTC_TIMESTAMP(6)"
                                           " FROM prefork_jobs WHERE queue = %s", (queue,))[0]
                if status == "reserved" and expired and expired_since is None:
                    expired_since = time.time()
                lockers |= db.lock_holders()
                time.sleep(0.2)
            reserved_expired_for = time.time() - expired_since if expired_since else 0.0
            a_ready = bool(a.events("worker_ready"))
            proxy.resume()
            scenario.log("B's link flows again")
            try:
                poll_until(lambda: not db.unfinished(queue), settings.drain_timeout,
                           interval=0.2, message="the job to finish")
            except TimeoutError:
                pass
        finally:
            proxy.close()
        codes = scenario.stop_all()
        report.check("both exited 0 on SIGTERM", codes == [0, 0], f"exit statuses {codes}")
        jobs, ledger = audit_ledger(report, db, scenario.run, queue, keys)
        count_reexecutions(report, scenario.executions())
        finisher = next(iter(ledger.values()))[3] if ledger else None
        report.figures.update(
            stall_s=settings.stall_seconds, lease_s=settings.lease_seconds,
            reserved_with_expired_lease_during_stall_s=round(reserved_expired_for, 1),
            finished_by="A" if finisher in a.spawned_pids() else "B")
        b_sessions = sorted(e["connection"] for e in b.events("worker_ready"))
        report.check("A got the job back once its lease expired, while B's link was stalled",
                     status == "done",
                     f"the job stayed reserved with an expired lease for "
                     f"{reserved_expired_for:.1f} s of the {settings.stall_seconds:g} s stall "
                     f"(A ready: {a_ready}); server sessions holding row locks meanwhile: "
                     f"{sorted(lockers) or 'none seen (or no PROCESS privilege)'}, B's "
                     f"children's sessions: {b_sessions}")
        scenario.check_no_leftovers()
    return report


def _event_time(event):
    return datetime.fromisoformat(event["ts"]).timestamp()


# --- command line -------------------------------------------------------------------------

def _parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Chaos soak of the prefork-queue supervisor, with a ledger audit.",
        epilog="See the module docstring of tests/chaos.py for what each scenario does.")
    parser.add_argument("--scenario",
                        choices=("all", "chaos", "partition", "stall", "limits", "fork",
                                 "workflows"),
                        default="all")
    parser.add_argument("--full", action="store_true",
                        help="full size: 20,000 jobs, 240 s of chaos, a bigger partition run")
    parser.add_argument("--jobs", type=int, help="jobs of the chaos scenario")
    parser.add_argument("--chaos-seconds", type=float, help="length of the chaos window")
    parser.add_argument("--workers", type=int, help="workers of the chaos supervisor")
    parser.add_argument("--partition-jobs", type=int, help="jobs of the partition scenario")
    parser.add_argument("--seed", type=int, help="random seed (kills, payloads)")
    parser.add_argument("--dsn", help="run on this database instead of a throwaway MariaDB")
    parser.add_argument("--db-stop-command", help="with --dsn: how to stop the server")
    parser.add_argument("--db-start-command", help="with --dsn: how to start it again")
    parser.add_argument("--cleanup", action="store_true",
                        help="with --dsn: delete the run's jobs and ledger rows at the end")
    parser.add_argument("--workdir", help="keep logs here (default: a temporary directory, "
                                          "kept only when a check fails)")
    args = parser.parse_args(argv)
    if bool(args.db_stop_command) != bool(args.db_start_command):
        parser.error("give both --db-stop-command and --db-start-command, or neither")
    return args


def _settings(args):
    chaos = SoakSettings.full() if args.full else SoakSettings()
    partition = PartitionSettings.full() if args.full else PartitionSettings()
    for name, value in (("jobs", args.jobs), ("chaos_seconds", args.chaos_seconds),
                        ("workers", args.workers), ("seed", args.seed)):
        if value is not None:
            chaos = dataclasses.replace(chaos, **{name: value})
    for name, value in (("jobs", args.partition_jobs), ("seed", args.seed)):
        if value is not None:
            partition = dataclasses.replace(partition, **{name: value})
    return chaos, partition


def main(argv=None):
    args = _parse_args(argv)
    chaos_settings, partition_settings = _settings(args)

    def log(text):
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="pq-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    reports, servers = [], []

    def database(name):
        if args.dsn:
            server = (CommandServer(args.db_stop_command, args.db_start_command)
                      if args.db_stop_command else None)
            return Database(args.dsn, server)
        from throwaway_db import ThrowawayMariaDB  # needs mariadbd on PATH
        server = ThrowawayMariaDB(workdir, database=f"pq_{name}")
        servers.append(server)
        server.setup()
        log(f"throwaway MariaDB on port {server.port}")
        return Database(server.dsn, server)

    runs = []
    if args.scenario in ("all", "chaos"):
        runs.append(("chaos", run_chaos, chaos_settings))
    if args.scenario in ("all", "partition"):
        runs.append(("partition", run_partition, partition_settings))
    if args.scenario in ("all", "stall"):
        runs.append(("stall", run_stall, StallSettings(seed=args.seed)))
    if args.scenario in ("all", "fork"):
        runs.append(("fork", run_chaos, dataclasses.replace(
            SoakSettings.fork_per_job(args.full), seed=args.seed)))
    if args.scenario in ("all", "limits"):
        # limits_chaos imports this module: it is imported here, once this one is loaded.
        from limits_chaos import LimitsSettings, run_limits
        runs.append(("limits", run_limits, LimitsSettings.full() if args.full else LimitsSettings()))
    if args.scenario in ("all", "workflows"):
        from workflows_chaos import FlowSettings, run_workflows   # it imports this module
        runs.append(("workflows", run_workflows,
                     FlowSettings.full() if args.full else FlowSettings(seed=args.seed)))
    try:
        for name, runner, settings in runs:
            db = database(name)
            report = runner(db, settings, workdir, log)
            reports.append(report)
            print(report.text(), flush=True)
            if args.cleanup and args.dsn:
                db.cleanup(report.figures["run"], f"chaos-{report.figures['run']}")
    finally:
        for server in servers:
            server.cleanup()
    failed = [check for report in reports for check in report.failed()]
    if failed or args.workdir:
        print(f"logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
