"""The worker loop on a real MariaDB: in process (prefork.worker.Worker) and as
`prefork-queue work` in a subprocess. PRODUCT.md points 2-5, 7 and 9.
"""
import io
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager

import pytest
from conftest import APPS, admin_connection, cli_env, job_row, run_cli, scalar, wait_until
from harness import assert_never_logged

import prefork
from prefork import logs, registry
from prefork.errors import LeaseLost
from prefork.jobs import Lease, new_job
from prefork.worker.job_time import SCHEDSTAT, JobClock
from prefork.worker.loop import Worker

if str(APPS) not in sys.path:
    sys.path.insert(0, str(APPS))
registry.import_apps(["ledger_app"])
import ledger_app  # noqa: E402  (registered above; imported here to call a handler directly)

SECRET = "hunter2"          # in the flaky handler's exception message
CARD = "4111-1111"          # in the permanent handler's exception message
LEDGER_INSERT = "INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)"


@prefork.handler("test_worker.ledger_hold")
def ledger_hold(job):
    """Writes its effect, then keeps the completion transaction open for payload['hold'] s."""
    with job.transaction() as cursor:
        cursor.execute(LEDGER_INSERT, (job.idempotency_key, job.id))
        cursor.execute("DO SLEEP(%s)", (job.payload["hold"],))


# --- helpers -----------------------------------------------------------------------

@pytest.fixture
def log_lines():
    """The package's events as parsed JSON lines, through the real JsonFormatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    saved = (logs.LOGGER.level, logs.LOGGER.propagate, list(logs.LOGGER.handlers))
    for old in saved[2]:
        logs.LOGGER.removeHandler(old)
    logs.LOGGER.addHandler(handler)
    logs.LOGGER.setLevel(logging.DEBUG)

    def lines():
        text = stream.getvalue()
        return text, [json.loads(line) for line in text.splitlines()]

    yield lines
    logs.LOGGER.removeHandler(handler)
    for old in saved[2]:
        logs.LOGGER.addHandler(old)
    logs.LOGGER.setLevel(saved[0])
    logs.LOGGER.propagate = saved[1]


def json_events(stderr_text):
    """Every stderr line must be one JSON event; returns them parsed."""
    events = []
    for line in stderr_text.splitlines():
        assert line.startswith("{"), f"not a JSON log line: {line!r}"
        events.append(json.loads(line))
    return events


def names(events):
    return [event["event"] for event in events]


def insert_raw(conn, job_type, payload_text, max_attempts=5):
    """A row written behind the store's back, e.g. with a payload no enqueue would accept."""
    with conn.cursor() as cursor:
        cursor.execute(
            "INSERT INTO prefork_jobs (queue, job_type, payload, max_attempts, available_at,"
            " created_at, updated_at) VALUES ('default', %s, %s, %s, UTC_TIMESTAMP(6),"
            " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", (job_type, payload_text, max_attempts))
        return cursor.lastrowid


def ledger_rows(conn):
    with conn.cursor() as cursor:
        cursor.execute("SELECT idempotency_key, job_id FROM ledger ORDER BY job_id")
        return list(cursor.fetchall())


def db_name(dsn):
    return dsn.rsplit("/", 1)[1]


def lease_expired(conn, job_id):
    return scalar(conn, "SELECT lease_until <= UTC_TIMESTAMP(6) FROM prefork_jobs WHERE id = %s",
                  (job_id,)) == 1


@contextmanager
def cli_process(tmp_path, *args, dsn, name="work"):
    """`python -m prefork ARGS` in the background, stderr to a file; always killed at the end."""
    err_path = tmp_path / f"{name}.stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "prefork", *args], stdout=subprocess.DEVNULL,
                                stderr=err, env=cli_env(dsn))
    try:
        yield proc, err_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


# --- transient, permanent and exhausted failures, in process -------------------------

@pytest.mark.parametrize("detail, error", [
    ("message", f"ConnectionResetError: peer said: password={SECRET}"),
    ("class", "ConnectionResetError"),
])
def test_transient_failures_retry_until_done_and_store_the_error_as_error_detail_says(
        store, make_config, clean_db, log_lines, detail, error):
    s = store()
    job_id = s.enqueue(new_job("flaky", {"succeed_on": 3}, key="flaky-1"))
    worker = Worker(s, make_config(retry_base=0.01, retry_cap=0.05, error_detail=detail))
    seen_errors = []

    def one_round():
        worker.run(once=True)
        row = job_row(clean_db, job_id)
        if row["last_error"] is not None:
            seen_errors.append(row["last_error"])
        return row["status"] == "done"

    wait_until(one_round, timeout=10, message="the flaky job to be done")
    row = job_row(clean_db, job_id)
    assert row["attempts"] == 3 and worker.processed == 3
    assert set(seen_errors) == {error}
    assert [entry["error"] for entry in json.loads(row["error_history"])] == [error, error]
    assert ledger_rows(clean_db) == [("flaky-1", job_id)]
    text, events = log_lines()
    failed = [e for e in events if e["event"] == "job_failed"]
    assert [e["attempt"] for e in failed] == [1, 2]
    assert all(e["error"] == error for e in failed)
    # Every failed attempt's traceback: where it was raised, ending in the error.
    assert all(", in flaky" in e["traceback"] and e["traceback"].splitlines()[-1] == error
               for e in failed)
    assert names(events).count("job_completed") == 1
    assert "succeed_on" not in text   # never the payload
    assert (SECRET in text) is (detail == "message")


def test_unknown_type_and_malformed_payloads_are_dead_after_one_attempt(store, make_config,
                                                                        clean_db, log_lines):
    s = store()
    unknown = s.enqueue(new_job("no.such.type", {"a": 1}))
    not_json = insert_raw(clean_db, "noop", "not json")
    not_object = insert_raw(clean_db, "noop", "[1]")
    oversized = s.enqueue(new_job("noop", {"blob": "x" * 200}))
    worker = Worker(s, make_config(max_payload_bytes=100))
    assert worker.run(stop_when_empty=True) == 4
    expected = {unknown: "unknown job type", not_json: "malformed payload",
                not_object: "malformed payload", oversized: "oversized payload"}
    for job_id, error in expected.items():
        row = job_row(clean_db, job_id)
        assert (row["status"], row["attempts"], row["last_error"]) == ("dead", 1, error), row
        assert row["finished_at"] is not None and row["lease_token"] is None
    text, events = log_lines()
    assert names(events).count("job_dead") == 4
    assert "not json" not in text and "xxxxxxxx" not in text


def test_permanent_error_is_dead_at_once_with_the_class_name_only_under_error_detail_class(
        store, make_config, clean_db, log_lines):
    s = store()
    job_id = s.enqueue(new_job("permanent", {"card": "4111"}, max_attempts=5))
    Worker(s, make_config(error_detail="class")).run(stop_when_empty=True)
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("dead", 1)
    assert row["last_error"] == "prefork.errors.PermanentError"
    text, events = log_lines()
    (dead,) = [e for e in events if e["event"] == "job_dead"]
    assert dead["traceback"].splitlines()[-1] == "prefork.errors.PermanentError"
    assert CARD not in text and "declined" not in text and '"card"' not in text
    assert CARD not in row["error_history"]


def test_exhausted_attempts_go_to_dead(store, make_config, clean_db):
    s = store()
    job_id = s.enqueue(new_job("flaky", {"succeed_on": 99}, key="never", max_attempts=2))
    worker = Worker(s, make_config(retry_base=0.01, retry_cap=0.02))

    def dead():
        worker.run(once=True)
        return job_row(clean_db, job_id)["status"] == "dead"

    wait_until(dead, timeout=10, message="the job to go dead")
    row = job_row(clean_db, job_id)
    assert row["attempts"] == 2 and row["last_error"].startswith("ConnectionResetError: ")
    assert ledger_rows(clean_db) == []
    assert Worker(s, make_config()).run(once=True) == 0  # nothing left to retry


# --- shutdown race and idempotent effects, in process -----------------------------

def test_stop_that_wins_the_race_releases_the_claim_unrun(store, make_config, clean_db, log_lines):
    s = store()
    job_id = s.enqueue(new_job("ledger", key="race-1"))
    worker = Worker(s, make_config())
    job = worker.claim_next()
    assert job_row(clean_db, job_id)["attempts"] == 1  # the claim was committed
    worker.request_stop()
    worker.process(job)
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"], row["lease_token"]) == ("ready", 0, None)
    assert ledger_rows(clean_db) == [] and worker.processed == 0
    _, events = log_lines()
    assert "claim_released_on_shutdown" in names(events)
    assert_never_logged(names(events), "job_claimed")
    # The stopped worker claims nothing more; a fresh one gets attempt 1.
    assert worker.run() == 0 and job_row(clean_db, job_id)["status"] == "ready"
    assert Worker(s, make_config()).claim_next().attempt == 1


def test_effect_is_written_once_when_a_stale_run_finishes_after_the_new_owner(
        store, make_config, clean_db, log_lines):
    first_store, second_store = store(), store()
    job_id = first_store.enqueue(new_job("ledger", key="twice-1"))
    first = Worker(first_store, make_config(lease_seconds=0.2))
    stale = first.claim_next()
    wait_until(lambda: lease_expired(clean_db, job_id), timeout=5, message="the lease to expire")
    assert second_store.recover_expired() == 1
    assert Worker(second_store, make_config()).run(once=True) == 1
    assert ledger_rows(clean_db) == [("twice-1", job_id)]
    # The stale run's handler now runs: its completion transaction is refused.
    with pytest.raises(LeaseLost):
        ledger_app.ledger(stale)
    first.process(stale)  # and through the worker: logged as lost, nothing recorded
    assert ledger_rows(clean_db) == [("twice-1", job_id)]
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("done", 2)
    assert not stale.finished
    _, events = log_lines()
    assert names(events).count("job_lease_lost") == 1
    assert names(events).count("job_completed") == 1


def test_a_lease_that_runs_out_inside_the_transaction_is_kept_and_the_effect_commits_once(
        store, make_config, clean_db, log_lines):
    """The transaction's first statement fenced the lease and locked the job's row:
    a lease that runs out while the effect is written can no longer be taken
    (recovery skips the locked row), so the effect and "done" commit, once."""
    first_store, second_store = store(), store()
    job_id = first_store.enqueue(new_job("test_worker.ledger_hold", {"hold": 0.5}, key="hold-1"))
    # The run inserts its ledger row, then holds the transaction past its lease.
    assert Worker(first_store, make_config(lease_seconds=0.25)).run(once=True) == 1
    assert ledger_rows(clean_db) == [("hold-1", job_id)]
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"]) == ("done", 1)
    assert second_store.recover_expired() == 0
    _, events = log_lines()
    assert (names(events).count("job_completed"), names(events).count("job_lease_lost")) == (1, 0)


# --- `prefork-queue work` as a subprocess ---------------------------------------------

def test_work_retries_a_transient_failure_and_logs_no_message_under_error_detail_class(
        store, migrated, clean_db):
    job_id = store().enqueue(new_job("flaky", {"succeed_on": 3}, key="flaky-cli"))
    result = run_cli("work", "--app", "ledger_app", "--retry-base", "0.01", "--retry-cap", "0.05",
                     "--max-jobs", "3", "--error-detail", "class", dsn=migrated, timeout=60)
    assert result.returncode == 0, result.stderr
    row = job_row(clean_db, job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("done", 3, "ConnectionResetError")
    assert ledger_rows(clean_db) == [("flaky-cli", job_id)]
    events = json_events(result.stderr)
    failed = [e for e in events if e["event"] == "job_failed"]
    assert [(e["attempt"], e["error"]) for e in failed] == [(1, "ConnectionResetError"),
                                                            (2, "ConnectionResetError")]
    assert all(e["traceback"].splitlines()[-1] == "ConnectionResetError" for e in failed)
    assert names(events).count("job_completed") == 1
    assert SECRET not in result.stderr and "succeed_on" not in result.stderr
    assert SECRET not in result.stdout


def test_work_sends_permanent_failures_to_dead(store, migrated, clean_db):
    s = store()
    unknown = s.enqueue(new_job("no.such.type", {"token": "abc-secret"}))
    permanent = s.enqueue(new_job("permanent", {"card": "4111"}))
    malformed = insert_raw(clean_db, "noop", "[1]")
    result = run_cli("work", "--app", "ledger_app", "--stop-when-empty", "--error-detail",
                     "class", dsn=migrated, timeout=60)
    assert result.returncode == 0, result.stderr
    errors = {job_id: (job_row(clean_db, job_id)["status"], job_row(clean_db, job_id)["attempts"],
                       job_row(clean_db, job_id)["last_error"])
              for job_id in (unknown, permanent, malformed)}
    assert errors == {unknown: ("dead", 1, "unknown job type"),
                      permanent: ("dead", 1, "prefork.errors.PermanentError"),
                      malformed: ("dead", 1, "malformed payload")}
    assert names(json_events(result.stderr)).count("job_dead") == 3
    for secret in ("abc-secret", CARD, "declined"):
        assert secret not in result.stderr


def test_work_once_stop_when_empty_and_max_jobs(store, migrated, clean_db):
    s = store()
    ids = [s.enqueue(new_job("noop", {"n": n})) for n in range(6)]
    delayed = s.enqueue(new_job("noop", delay=3600))

    def done():
        return scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'")

    once = run_cli("work", "--app", "ledger_app", "--once", dsn=migrated, timeout=30)
    assert once.returncode == 0, once.stderr
    assert done() == 1 and job_row(clean_db, ids[0])["status"] == "done"
    assert names(json_events(once.stderr)).count("job_completed") == 1

    max_jobs = run_cli("work", "--app", "ledger_app", "--max-jobs", "2", dsn=migrated, timeout=30)
    assert max_jobs.returncode == 0, max_jobs.stderr
    assert done() == 3 and [job_row(clean_db, i)["status"] for i in ids[1:3]] == ["done"] * 2

    drain = run_cli("work", "--app", "ledger_app", "--stop-when-empty", dsn=migrated, timeout=30)
    assert drain.returncode == 0, drain.stderr
    assert done() == 6
    assert job_row(clean_db, delayed)["status"] == "ready"  # not due: not waited for
    stopped = [e for e in json_events(drain.stderr) if e["event"] == "worker_stopped"]
    assert [e["processed"] for e in stopped] == [3]

    empty = run_cli("work", "--app", "ledger_app", "--once", dsn=migrated, timeout=30)
    assert empty.returncode == 0 and done() == 6


@pytest.mark.parametrize("args", [["--once", "--max-jobs", "2"], ["--max-jobs", "0"],
                                  ["--max-jobs", "-1"], ["--max-jobs", "two"]])
def test_work_refuses_bad_modes_in_one_line(migrated, clean_db, args):
    result = run_cli("work", "--app", "ledger_app", *args, dsn=migrated, timeout=30)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--max-jobs" in result.stderr and "Traceback" not in result.stderr


def test_sigterm_mid_job_finishes_the_job_and_exits_0(store, migrated, clean_db, tmp_path):
    s = store()
    running = s.enqueue(new_job("sleep", {"seconds": 1.0}))
    waiting = s.enqueue(new_job("sleep", {"seconds": 1.0}))
    with cli_process(tmp_path, "work", "--app", "ledger_app", dsn=migrated) as (proc, err_path):
        # Mid-job: its handler started (job_claimed is logged just before it runs). A
        # reserved row alone is not that: a stop between the claim and the start gives
        # the job back unrun, by design.
        def started():
            text = err_path.read_text()
            return any(e["event"] == "job_claimed" and e["job_id"] == running
                       for e in json_events(text[:text.rfind("\n") + 1]))   # whole lines
        wait_until(started, timeout=15, message="the first job's handler to start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, err_path.read_text()
    row = job_row(clean_db, running)
    assert (row["status"], row["attempts"]) == ("done", 1)
    row = job_row(clean_db, waiting)
    assert (row["status"], row["attempts"]) == ("ready", 0)  # not started after the stop
    events = json_events(err_path.read_text())
    completed = [e for e in events if e["event"] == "job_completed"]
    assert [e["job_id"] for e in completed] == [running]
    assert completed[0]["elapsed_ms"] >= 900  # the handler ran to its end
    assert names(events)[-1] == "worker_stopped"


def test_lost_database_connection_ends_work_with_worker_fatal(migrated, clean_db, tmp_path):
    database = db_name(migrated)
    admin = admin_connection()

    def connection_ids():
        with admin.cursor() as cursor:
            cursor.execute("SELECT ID FROM information_schema.processlist"
                           " WHERE USER = %s AND DB = %s", ("root", database))
            return {row[0] for row in cursor.fetchall()}

    try:
        before = connection_ids()
        with cli_process(tmp_path, "work", "--app", "ledger_app", "--poll-interval", "0.05",
                         dsn=migrated) as (proc, err_path):
            wait_until(lambda: "worker_started" in err_path.read_text(), timeout=15,
                       message="the worker to start polling")
            new = wait_until(lambda: connection_ids() - before, timeout=5,
                             message="the worker's connection")
            assert len(new) == 1, new
            with admin.cursor() as cursor:
                cursor.execute(f"KILL {int(new.pop())}")
            returncode = proc.wait(15)
        stderr = err_path.read_text()
        assert returncode == 3, stderr
        assert "Traceback" not in stderr
        fatal = [e for e in json_events(stderr) if e["event"] == "worker_fatal"]
        assert len(fatal) == 1 and fatal[0]["level"] == "error"
        assert fatal[0]["error"].startswith("OperationalError 2013: Lost connection"), fatal
    finally:
        admin.close()


# --- batches: completions written together -------------------------------------------

class RecordingListener:
    """Keeps what a worker reports, as [(report, what it reported)]."""

    def __init__(self):
        self.reports = []

    def busy(self, job):
        self.reports.append(("busy", job))

    def held(self, leases):
        self.reports.append(("held", list(leases)))

    def waiting(self):
        self.reports.append(("waiting", None))

    def idle(self, outcome, seconds):
        self.reports.append(("idle", outcome))

    def saved(self, lost):
        self.reports.append(("saved", list(lost)))

    def names(self):
        return [name for name, _ in self.reports]


def recording_worker(s, config, supervised=True):
    """A worker whose reports are kept (see RecordingListener)."""
    listener = RecordingListener()
    worker = Worker(s, config, listener, supervised=supervised)
    worker.job_seconds = 0.001   # recent jobs were fast: claims take batches
    return worker, listener.reports


def test_a_batch_writes_its_completions_with_its_last_job(store, make_config, clean_db,
                                                          log_lines):
    s = store()
    ids = [s.enqueue(new_job("noop")) for _ in range(5)]
    worker, states = recording_worker(s, make_config(claim_batch=4))
    job = worker.claim_next()
    assert [held.id for held in worker.held] == ids[1:4]
    held_jobs = list(worker.held)
    for position in range(3):
        outcome, next_job, _ = worker.process(job, chain_next=lambda: True)
        assert (outcome, next_job) == ("unsaved", None)
        assert job_row(clean_db, job.id)["status"] == "reserved"   # not written yet
        if position == 1:   # another owner took this one meanwhile: its completion is lost
            with clean_db.cursor() as cursor:
                cursor.execute("UPDATE prefork_jobs SET lease_token = %s WHERE id = %s",
                               ("f" * 32, job.id))
        job = worker.claim_next()
    outcome, next_job, queue_empty = worker.process(job, chain_next=lambda: True)
    # The last one's write completed the batch and claimed the job after it.
    assert outcome == "done" and next_job.id == ids[4] and not queue_empty
    assert [job_row(clean_db, job_id)["status"] for job_id in ids] == \
        ["done", "reserved", "done", "done", "reserved"]
    assert ("saved", [ids[1]]) in states
    assert states[0] == ("held", [held.lease for held in held_jobs])
    assert all(isinstance(lease, Lease) for lease in states[0][1])
    _, events = log_lines()
    completed = [e["job_id"] for e in events if e["event"] == "job_completed"]
    assert sorted(completed) == [ids[0], ids[2], ids[3]]
    assert [e["job_id"] for e in events if e["event"] == "job_lease_lost"] == [ids[1]]


def test_a_slow_job_in_a_batch_writes_the_completions_before_it(store, make_config, clean_db,
                                                                log_lines):
    s = store()
    fast = s.enqueue(new_job("noop"))
    slow = s.enqueue(new_job("sleep", {"seconds": 0.2}))
    after = s.enqueue(new_job("noop"))
    worker, states = recording_worker(s, make_config(claim_batch=3))
    assert worker.process(worker.claim_next())[0] == "unsaved"
    assert worker.process(worker.claim_next())[0] == "done"
    # Slower than the hold budget: the fast one's completion was written at
    # once, and the job held behind it given back for a sibling.
    assert ("saved", []) in states and ("held", []) in states
    assert job_row(clean_db, fast)["status"] == "done" and job_row(clean_db, slow)["status"] == "done"
    row = job_row(clean_db, after)
    assert (row["status"], row["attempts"]) == ("ready", 0)
    _, events = log_lines()
    assert [e["job_id"] for e in events if e["event"] == "claim_released"] == [after]


class StarvedClock(JobClock):
    """Says that the worker's thread waited for a CPU all along: every job's own time is 0."""

    def _waited(self):
        return time.monotonic_ns()


def test_a_job_that_only_waited_for_a_cpu_is_not_slow(store, make_config, clean_db):
    """On a saturated host a quick job can be descheduled past the hold budget: the
    held jobs stay (siblings are as short of CPU), and the next claim is no smaller."""
    s = store()
    ids = [s.enqueue(new_job("sleep", {"seconds": 0.2})), s.enqueue(new_job("noop"))]
    worker, states = recording_worker(s, make_config(claim_batch=3))
    worker.clock = StarvedClock()
    assert worker.process(worker.claim_next())[0] == "unsaved"
    assert [job.id for job in worker.held] == ids[1:] and ("held", []) not in states
    assert job_row(clean_db, ids[1])["status"] == "reserved"
    assert worker.batch_size() == 3


def test_a_jobs_own_time_leaves_out_its_wait_for_a_cpu(tmp_path):
    """Sharing one CPU with a busy process, a thread waits for it about half the
    time: a job's own time leaves that out (Linux's run delay)."""
    if not os.path.exists(SCHEDSTAT):
        pytest.skip("no run delay to read on this kernel")
    program = textwrap.dedent("""
        import os, signal, time
        from prefork.worker.job_time import JobClock
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        hog = os.fork()
        if hog == 0:   # busy, on our CPU; gone by itself should we fail to kill it
            hog_until = time.monotonic() + 10
            while time.monotonic() < hog_until:
                pass
            os._exit(0)
        clock = JobClock()
        started = clock.start()
        spin_until = time.monotonic() + 0.5
        while time.monotonic() < spin_until:
            pass
        own = clock.own_seconds(started)
        print(own, time.monotonic() - started)
        os.kill(hog, signal.SIGKILL)
        os.waitpid(hog, 0)
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    own, elapsed = map(float, out.split())
    assert elapsed >= 0.5 and own <= 0.8 * elapsed, (own, elapsed)


def session_questions(s):
    return int(s._one("SHOW SESSION STATUS LIKE 'Questions'")[1])


@pytest.mark.parametrize("supervised", [True, False])
def test_an_idle_worker_under_a_supervisor_waits_without_querying(store, make_config, clean_db,
                                                                  supervised):
    """The parent looks for jobs for all its children: an unwoken child only says
    again that it waits. Alone, a worker polls."""
    s = store()
    listener = RecordingListener()
    worker = Worker(s, make_config(), listener, idle_sleeps=(0.02, 0.02), supervised=supervised)
    before = session_questions(s)
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_until(lambda: listener.names().count("waiting") >= 10, timeout=5)
    worker.request_stop()
    thread.join(5)
    queries = session_questions(s) - before
    if supervised:   # the first claim's script, and reading the counter
        assert queries <= 15, queries
    else:   # a claim at every look: its read of where due jobs are (nothing due:
        # no transaction follows)
        assert queries >= 10, queries


def test_a_worker_alone_writes_each_completion_at_once(store, make_config, clean_db):
    """`work` has no parent to write a batch's completions should a slow job hold
    them up, so it writes each at once, batch or not."""
    s = store()
    ids = [s.enqueue(new_job("noop")) for _ in range(3)]
    worker, states = recording_worker(s, make_config(claim_batch=3), supervised=False)
    job = worker.claim_next()
    assert len(worker.held) == 2
    assert worker.process(job)[0] == "done"
    assert job_row(clean_db, ids[0])["status"] == "done"
    assert worker.run(stop_when_empty=True) == 3
    assert [job_row(clean_db, job_id)["status"] for job_id in ids] == ["done"] * 3
    assert "saved" not in [name for name, _ in states]
