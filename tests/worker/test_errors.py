"""Errors an operator can diagnose (issue 12), through the real CLI and supervisor on
both backends: a failed attempt's class and message in `show` (masked, cut, or the
class only under error_detail = class), its traceback in the worker's log, database
errors with their code and the server's words, the per-attempt history, per-type
retry rules, `retry --max-attempts` and a handler's own `.enqueue()`.
"""
import json
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from conftest import SERVER, admin_connection, cli_env, job_row, run_cli, wait_until
from harness import supervisor_starter

from prefork.failures import CUT, MAX_ERROR_LENGTH
from prefork.jobs import new_job
from prefork.retry import Decision

BILLING_ERROR = "ValueError: customer 42 has no billing address"
WORK = ("work", "--app", "errors_app", "--stop-when-empty")


@pytest.fixture
def queue(backend, backend_store, request):
    """(DSN, store) of the backend under test, on an empty queue."""
    dsn = request.getfixturevalue("migrated" if backend == "mysql" else "sqlite_migrated")
    return dsn, backend_store()


def show(dsn, job_id):
    result = run_cli("show", str(job_id), dsn=dsn)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def history(shown):
    return [(entry["attempt"], entry["error"]) for entry in shown["error_history"]]


def log_failures(stderr, log_format):
    """[(event, error, traceback lines)] of the job_failed and job_dead events of a log."""
    if log_format == "json":
        return [(e["event"], e["error"], e["traceback"].splitlines())
                for e in map(json.loads, stderr.splitlines())
                if e["event"] in ("job_failed", "job_dead")]
    found = []
    for line in stderr.splitlines():   # text: the traceback follows its line, indented
        match = re.search(r" (job_failed|job_dead) .* error=(.*?)(?: retry_in_s=\S+)?$", line)
        if match:
            found.append((match[1], match[2], []))
        elif line.startswith("    ") and found:
            found[-1][2].append(line[4:])
    return found


# --- a handler's error: show, failed, the log ------------------------------------------------

@pytest.mark.parametrize("detail, log_format, error", [
    ("message", "json", BILLING_ERROR),
    ("class", "text", "ValueError"),
])
def test_a_handlers_error_is_in_show_and_its_traceback_in_the_log(queue, detail, log_format,
                                                                  error):
    dsn, store = queue
    job_id = store.enqueue(new_job("errors.billing", {"customer": 42}, max_attempts=2))
    work = run_cli(*WORK, "--error-detail", detail, "--log-format", log_format, dsn=dsn)
    assert work.returncode == 0, work.stderr

    shown = show(dsn, job_id)
    assert (shown["status"], shown["attempts"], shown["last_error"]) == ("dead", 2, error)
    assert history(shown) == [(1, error), (2, error)]
    for entry in shown["error_history"]:
        at = datetime.fromisoformat(entry["at"])
        assert at.utcoffset() == timedelta(0)
        assert abs(datetime.now(timezone.utc) - at) < timedelta(minutes=5)
    failures = log_failures(work.stderr, log_format)
    assert [(name, logged) for name, logged, _ in failures] == \
        [("job_failed", error), ("job_dead", error)]
    for _, _, traceback in failures:
        assert traceback[0] == "Traceback (most recent call last):" and traceback[-1] == error
        assert any(line.rstrip().endswith(", in billing") for line in traceback), traceback
    assert ("customer 42" in work.stderr) is (detail == "message")
    assert error[:20] in run_cli("failed", dsn=dsn).stdout


def test_credentials_are_masked_in_the_row_the_history_and_the_log(sqlite_migrated,
                                                                   sqlite_store):
    secret = f"pw-{uuid.uuid4().hex}"
    job_id = sqlite_store().enqueue(new_job("errors.leaky", max_attempts=1))
    env = {"PREFORK_QUEUE_DB_PASSWORD": secret, "ERRORS_APP_SECRET": secret}
    work = run_cli(*WORK, dsn=sqlite_migrated, **env)
    assert work.returncode == 0, work.stderr
    shown = run_cli("show", str(job_id), dsn=sqlite_migrated, **env).stdout
    masked = "RuntimeError: login with *** refused by mysql://queue_worker:***@db/app"
    assert json.loads(shown)["last_error"] == masked and history(json.loads(shown)) == \
        [(1, masked)]
    assert secret not in shown and secret not in work.stderr
    (dead,) = [e for e in map(json.loads, work.stderr.splitlines()) if e["event"] == "job_dead"]
    assert dead["traceback"].splitlines()[-1] == masked


def test_a_long_error_is_cut_to_the_bound_on_both_backends(backend_store, db):
    store = backend_store()
    store.enqueue(new_job("noop"))
    (job,) = store.claim(["default"], "host-a:1", 30)
    assert store.fail(job, "\u00e9" * (3 * MAX_ERROR_LENGTH), Decision(dead=True, delay=0))
    row = db.row(job.id)
    assert len(row["last_error"]) == MAX_ERROR_LENGTH and row["last_error"].endswith(CUT)
    assert json.loads(row["error_history"])[0]["error"] == row["last_error"]


# --- database errors name what failed ----------------------------------------------------------

@pytest.fixture
def worker_account(database, migrated, clean_db):
    """A throwaway account with the queue's grants (from `grants`) and only SELECT on the
    application's table `invoices`: (user, password, its DSN). Dropped afterwards."""
    user, password = f"pq_err_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    grants = run_cli("grants", "--user", user, "--host", "127.0.0.1", "--database", database)
    assert grants.returncode == 0, grants.stderr
    admin = admin_connection(database=database)
    try:
        with admin.cursor() as cursor:
            cursor.execute("CREATE TABLE invoices (job_id BIGINT NOT NULL)")
            cursor.execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
            for statement in grants.stdout.splitlines():
                if statement.startswith("GRANT "):
                    cursor.execute(statement)
            cursor.execute(f"GRANT SELECT ON `{database}`.invoices TO %s@'127.0.0.1'", (user,))
        yield user, password, f"mysql://{user}@{SERVER['host']}:{SERVER['port']}/{database}"
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS %s@'127.0.0.1'", (user,))
            cursor.execute("DROP TABLE IF EXISTS invoices")
        admin.close()


def test_a_denied_write_reads_as_the_servers_refusal(worker_account, store, clean_db, database):
    user, password, dsn = worker_account
    s = store()
    denied_job = s.enqueue(new_job("errors.invoice", max_attempts=1))
    leaky_job = s.enqueue(new_job("errors.leaky", max_attempts=1))
    work = run_cli(*WORK, dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=password,
                   ERRORS_APP_SECRET=password)
    assert work.returncode == 0, work.stderr
    row = job_row(clean_db, denied_job)
    assert row["status"] == "dead"
    assert row["last_error"].startswith(
        f"OperationalError 1142: INSERT command denied to user '{user}'@'127.0.0.1'")
    assert "invoices" in row["last_error"]
    assert [entry["error"] for entry in json.loads(row["error_history"])] == [row["last_error"]]
    assert job_row(clean_db, leaky_job)["last_error"].count("***") == 2
    assert password not in work.stderr + str(job_row(clean_db, leaky_job))

    # The CLI's own database error: one line, the code and the server's words, exit 3.
    with admin_connection(database=database).cursor() as cursor:
        cursor.execute(f"REVOKE INSERT ON `{database}`.prefork_jobs FROM %s@'127.0.0.1'", (user,))
    refused = run_cli("enqueue", "noop", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=password)
    assert refused.returncode == 3 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(
        f"prefork-queue: error: database error OperationalError 1142: INSERT command denied "
        f"to user '{user}'@'127.0.0.1'") and "prefork_jobs" in refused.stderr


def test_a_sqlite_error_in_a_handler_names_the_missing_table(sqlite_migrated, sqlite_store):
    job_id = sqlite_store().enqueue(new_job("errors.invoice", max_attempts=1))
    assert run_cli(*WORK, dsn=sqlite_migrated).returncode == 0
    assert show(sqlite_migrated, job_id)["last_error"] == \
        "OperationalError: no such table: invoices"


# --- per-type retry rules, retry --max-attempts -------------------------------------------------

def test_retry_rules_decide_which_failures_retry(queue, db):
    dsn, store = queue
    ids = {name: store.enqueue(new_job("errors.picky", {"raise": name}, max_attempts=3))
           for name in ("timeout", "key", "value")}
    capped = store.enqueue(new_job("errors.capped", max_attempts=5))
    assert run_cli(*WORK, dsn=dsn).returncode == 0
    states = {name: (db.row(job_id)["status"], db.row(job_id)["attempts"])
              for name, job_id in ids.items()}
    assert states == {"timeout": ("dead", 3),   # retry_on: retried until out of attempts
                      "key": ("dead", 1),       # discard_on: dead at once
                      "value": ("dead", 1)}     # not in retry_on: dead at once
    assert history(show(dsn, ids["key"])) == [(1, "KeyError: 'picky failed'")]
    assert (db.row(capped)["status"], db.row(capped)["attempts"]) == ("dead", 2)  # its cap


def test_retry_max_attempts_gives_a_dead_job_more_attempts(queue, db):
    dsn, store = queue
    job_id = store.enqueue(new_job("errors.billing", {"customer": 42}, max_attempts=1))
    assert run_cli(*WORK, dsn=dsn).returncode == 0
    assert db.row(job_id)["status"] == "dead"
    for bad, words in ((["0"], "must be at least 1"), (["x"], "not a whole number"),
                       (["4294967296"], "from 1 to 4294967295")):
        refused = run_cli("retry", str(job_id), "--max-attempts", *bad, dsn=dsn)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and db.row(job_id)["status"] == "dead"

    retried = run_cli("retry", str(job_id), "--max-attempts", "3", dsn=dsn)
    assert retried.stdout.strip() == "retried 1 job", retried.stderr
    row = db.row(job_id)
    assert (row["status"], row["attempts"], row["max_attempts"]) == ("ready", 0, 3)
    assert run_cli(*WORK, dsn=dsn).returncode == 0
    shown = show(dsn, job_id)
    assert (shown["status"], shown["attempts"]) == ("dead", 3)
    assert history(shown) == [(1, BILLING_ERROR)] + [(n, BILLING_ERROR) for n in (1, 2, 3)]


# --- a worker's death, in the history ------------------------------------------------------------

def test_a_workers_death_is_an_attempt_in_the_history(tmp_path, migrated, clean_db, store):
    job_id = store().enqueue(new_job("segv", max_attempts=10))
    with supervisor_starter(tmp_path, migrated, "--app", "ledger_app,supervised_app") as start:
        start("--workers", "1", "--retry-base", "0.01", "--max-crashes", "2")
        wait_until(lambda: job_row(clean_db, job_id)["status"] == "dead", timeout=30,
                   message="the crashing job to be dead")
    errors = [(entry["attempt"], entry["error"])
              for entry in json.loads(job_row(clean_db, job_id)["error_history"])]
    assert errors == [(1, "worker died: SIGSEGV"), (2, "crashed its worker 2 times: SIGSEGV")]


# --- a handler enqueues its own jobs ----------------------------------------------------------------

def test_a_handlers_enqueue_uses_the_configured_dsn_and_its_max_attempts(sqlite_migrated,
                                                                          sqlite_db):
    script = ("import errors_app\n"
              "print(errors_app.capped.enqueue({'n': 1}))\n"
              "print(errors_app.capped.enqueue({'n': 2}, max_attempts=1, queue='low'))\n"
              "try:\n    errors_app.capped(None)\n"   # still the handler, callable as before
              "except ConnectionError as exc:\n    print('called')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, env=cli_env(sqlite_migrated))
    assert result.returncode == 0, result.stderr
    first, second, called = result.stdout.split()
    assert called == "called"
    rows = [sqlite_db.row(int(job_id)) for job_id in (first, second)]
    assert [(row["job_type"], row["queue"], row["max_attempts"], row["payload"])
            for row in rows] == [("errors.capped", "default", 2, '{"n":1}'),
                                 ("errors.capped", "low", 1, '{"n":2}')]
