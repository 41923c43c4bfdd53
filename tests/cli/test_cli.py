"""The job CLI as a user runs it: `python -m prefork ...` in a subprocess against
a real MariaDB. Bad input is one line on stderr, no traceback, no change to the
database, and the exit code the README promises (tests/cli_checks.py).
"""
import json
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta

import pymysql
import pytest
from cli_checks import DATABASE_ERROR, USAGE_ERROR, assert_refused, closed_port, run_cli_in
from conftest import SERVER, admin_connection, cli_env, job_row, run_cli, scalar, scratch_database

from prefork.cli.dispatch import parse
from prefork.cli.parser import with_default_command
from prefork.cli.status_report import utc_text
from prefork.jobs import new_job
from prefork.retry import Decision

JOBS = "SELECT COUNT(*) FROM prefork_jobs"


# --- helpers -----------------------------------------------------------------------

def job_count(conn):
    return scalar(conn, JOBS)


def dsn_for(database, user=None):
    return f"mysql://{user or SERVER['user']}@{SERVER['host']}:{SERVER['port']}/{database}"


@pytest.fixture
def fresh_database(mysql_server):
    """An empty database (no schema) created for the test and dropped after it."""
    with scratch_database("pq_cli") as name:
        yield name


# --- enqueue ---------------------------------------------------------------------------

def test_enqueue_prints_the_id_and_the_same_key_gives_the_same_id(migrated, clean_db):
    first = run_cli("enqueue", "noop", '{"n": 1}', "--key", "order-1", dsn=migrated)
    assert first.returncode == 0, first.stderr
    job_id = int(first.stdout.strip())
    assert job_row(clean_db, job_id)["payload"] == '{"n":1}'
    again = run_cli("enqueue", "noop", '{"n": 2}', "--key", "order-1", dsn=migrated)
    other = run_cli("enqueue", "noop", '{"n": 1}', "--key", "order-2", dsn=migrated)
    assert int(again.stdout) == job_id and int(other.stdout) != job_id
    assert job_count(clean_db) == 2
    delayed = run_cli("enqueue", "noop", "--queue", "mail", "--delay", "60", "--priority", "-3",
                      dsn=migrated)
    row = job_row(clean_db, int(delayed.stdout))
    assert (row["queue"], row["priority"], row["payload"]) == ("mail", -3, "{}")
    assert (row["available_at"] - row["created_at"]).total_seconds() == pytest.approx(60, abs=2)


def test_bulk_enqueue_of_3000_jobs_is_drained_exactly_once(migrated, clean_db, tmp_path):
    total = 3_000   # six of the bulk enqueue's chunks of 500 rows
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps({"type": "ledger", "key": f"bulk-{n}", "payload": {"n": n}})
                            + "\n" for n in range(total)))
    started = time.monotonic()
    enqueued = run_cli("enqueue", "--app", "ledger_app", "--file", str(path), dsn=migrated)
    enqueue_s = time.monotonic() - started
    assert enqueued.returncode == 0, enqueued.stderr
    assert enqueued.stdout.strip() == f"enqueued {total} new jobs (0 already present)"
    again = run_cli("enqueue", "--file", str(path), dsn=migrated)
    assert again.stdout.strip() == f"enqueued 0 new jobs ({total} already present)"
    assert job_count(clean_db) == total

    started = time.monotonic()
    drained = run_cli("work", "--app", "ledger_app", "--stop-when-empty", "--log-level", "warning",
                      dsn=migrated, timeout=240)
    drain_s = time.monotonic() - started
    assert drained.returncode == 0, drained.stderr
    assert drained.stderr == ""  # no warnings, no errors
    print(f"\nenqueue --file {total}: {enqueue_s:.2f}s; work --stop-when-empty: {drain_s:.2f}s "
          f"({total / drain_s:.0f} jobs/s)")
    with clean_db.cursor() as cursor:
        cursor.execute("SELECT status, MIN(attempts), MAX(attempts), COUNT(*) FROM prefork_jobs"
                       " GROUP BY status")
        assert cursor.fetchall() == (("done", 1, 1, total),)
        cursor.execute("SELECT COUNT(*), COUNT(DISTINCT l.job_id) FROM ledger l"
                       " JOIN prefork_jobs j ON j.id = l.job_id"
                       " AND j.idempotency_key = l.idempotency_key")
        assert cursor.fetchone() == (total, total)
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == total


# --- the command line: settings before or after the command ---------------------------

@pytest.mark.parametrize("argv,expected", [
    ([], ["run"]),
    (["--workers", "8"], ["run", "--workers", "8"]),            # the README's first command
    (["--dsn", "status"], ["run", "--dsn", "status"]),          # a flag's value is no command
    (["--dsn", "sqlite:///q.db", "status"], ["--dsn", "sqlite:///q.db", "status"]),
    (["--log-level=debug", "enqueue", "noop"], ["--log-level=debug", "enqueue", "noop"]),
    (["--help"], ["--help"]),
    (["--dsn", "sqlite:///q.db", "--version"], ["--dsn", "sqlite:///q.db", "--version"]),
])
def test_a_command_line_without_a_command_runs_the_supervisor(argv, expected):
    assert with_default_command(argv) == expected


def test_the_flags_a_supervisor_reloads_with_come_from_both_sides_of_the_command():
    """SIGHUP reloads the config under the command line's flags: args.flags must hold
    those given before the command too, and the one after it where both are given."""
    args = parse(["--workers", "3", "--config", "a.conf", "run", "--queues", "mail"])
    assert (args.command, args.config) == ("run", "a.conf")
    assert (args.flags["workers"], args.flags["queues"], args.flags["dsn"]) == ("3", "mail", None)
    both = parse(["--workers", "3", "--config=a.conf", "run", "--workers", "4", "--config", "b"])
    assert (both.flags["workers"], both.config) == ("4", "b")


def test_settings_flags_work_before_the_command(migrated, clean_db, tmp_path):
    conf = tmp_path / "queue.conf"
    conf.write_text(f"[prefork-queue]\ndsn = {migrated}\n")
    enqueued = run_cli_in(tmp_path, "--config", str(conf), "--log-level", "debug", "enqueue",
                          "noop", "{}", "--key", "before-1")
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = int(enqueued.stdout)
    assert job_row(clean_db, job_id)["idempotency_key"] == "before-1"
    status = run_cli_in(tmp_path, "--dsn", migrated, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["queues"]["default"]["ready"] == 1
    # Both sides: the flag after the command wins.
    with closed_port() as port:
        shown = run_cli_in(tmp_path, "--dsn", f"mysql://root@127.0.0.1:{port}/jobs", "show",
                           str(job_id), "--dsn", migrated)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == job_id
    assert not list(tmp_path.glob("*.db")), "a flag was lost: the default SQLite file was used"


@pytest.mark.parametrize("args,words", [
    (["statsu"], ["invalid choice: 'statsu'"]),
    (["status", "--bogus"], ["unrecognized arguments", "--bogus"]),
    (["--bogus=1", "status"], ["unrecognized arguments", "--bogus"]),
    (["--lease-seconds", "0", "status"], ["lease_seconds", "greater than 0"]),
    (["--max-attempts", "3", "status"], ["status does not read --max-attempts", "enqueue"]),
    (["--workers", "4", "bench"], ["--workers", "after the command"]),   # bench's is a list
    (["--log-level", "debug"], ["no job handlers"]),   # run, with a DSN and no --app
])
def test_bad_usage_exits_2_before_touching_the_database(args, words):
    with closed_port() as port:
        result = run_cli(*args, dsn=f"mysql://root@127.0.0.1:{port}/jobs")
    assert_refused(result, *words, exit_code=USAGE_ERROR)


def test_help_and_version_exit_0_before_or_after_settings():
    version = run_cli("--dsn", "sqlite:///q.db", "--version")
    assert (version.returncode, version.stdout.split()[0]) == (0, "prefork-queue")
    top = run_cli("--workers", "8", "--help")
    assert top.returncode == 0 and "COMMAND" in top.stdout and "config --help" in top.stdout
    status = run_cli("--dsn", "sqlite:///q.db", "status", "--help")
    assert status.returncode == 0 and status.stdout.startswith("usage: prefork-queue status")


# --- bad input: one line, non-zero, nothing changed ------------------------------------

@pytest.mark.parametrize("bad_dsn,words", [
    ("postgres://root@127.0.0.1:3306/jobs", ["bad DSN", "postgres"]),
    ("mysql://root:s3cret-pw@127.0.0.1:3306/jobs", ["bad DSN", "password"]),
    ("mysql://root@127.0.0.1:3306/", ["bad DSN", "database"]),
    ("mysql://root@127.0.0.1:notaport/jobs", ["bad DSN", "port"]),
    ("mysql://root@127.0.0.1:3306/jobs?ssl=1", ["bad DSN", "ssl"]),
])
def test_a_bad_dsn_is_one_line_and_a_usage_error(migrated, clean_db, bad_dsn, words):
    before = job_count(clean_db)
    for args in (["enqueue", "noop", "{}"], ["work", "--app", "ledger_app", "--once"], ["failed"]):
        result = run_cli(*args, "--connect-timeout", "2", dsn=bad_dsn, timeout=30)
        assert_refused(result, *words)
        assert "s3cret-pw" not in result.stderr
    assert job_count(clean_db) == before


UNREACHABLE_COMMANDS = [["enqueue", "noop", "{}"], ["work", "--app", "ledger_app", "--once"],
                        ["failed"], ["show", "1"], ["status"], ["migrate"],
                        ["run", "--app", "ledger_app"], ["--app", "ledger_app", "--workers", "1"]]


@pytest.mark.parametrize("args", UNREACHABLE_COMMANDS, ids=" ".join)
def test_an_unreachable_database_exits_3(args):
    with closed_port() as port:
        address = f"127.0.0.1:{port}"
        result = run_cli(*args, "--connect-timeout", "2", dsn=f"mysql://root@{address}/jobs",
                         timeout=30)
    assert_refused(result, "cannot connect", address, exit_code=DATABASE_ERROR)


def test_an_sqlite_file_that_cannot_be_opened_exits_3(tmp_path):
    missing = tmp_path / "no-such-dir" / "q.db"
    result = run_cli("enqueue", "noop", dsn=f"sqlite:///{missing}")
    assert_refused(result, "cannot open SQLite database", exit_code=DATABASE_ERROR)


def test_an_empty_dsn_is_one_line(mysql_server):
    assert_refused(run_cli("enqueue", "noop", "--dsn", ""), "no database configured")


def test_missing_schema_is_one_line_and_creates_nothing(fresh_database):
    dsn = dsn_for(fresh_database)
    for args in (["enqueue", "noop", "{}"], ["work", "--app", "ledger_app", "--once"],
                 ["failed"], ["show", "1"]):
        assert_refused(run_cli(*args, dsn=dsn), "no queue database at", "run migrate")
    conn = admin_connection()
    try:
        assert scalar(conn, "SELECT COUNT(*) FROM information_schema.tables"
                            " WHERE table_schema = %s", (fresh_database,)) == 0
    finally:
        conn.close()


@pytest.mark.parametrize("args,words", [
    (["noop", "{oops"], ["invalid JSON payload"]),
    (["noop", "[1, 2]"], ["payload must be a JSON object"]),
    (["noop", '"text"'], ["payload must be a JSON object"]),
    (["noop", json.dumps({"blob": "x" * 70_000})], ["70", "max_payload_bytes"]),
    (["noop", '{"blob": "xxxxxxxxxxxxxxxxxxxx"}', "--max-payload-bytes", "16"],
     ["over the limit of 16"]),
    (["noop", "{}", "--queue", "bad queue"], ["invalid queue name"]),
    (["noop", "{}", "--queue", ""], ["invalid queue name"]),
    (["bad type!", "{}"], ["invalid job type"]),
    (["noop", "{}", "--key", "k" * 192], ["idempotency key"]),
    (["noop", "{}", "--delay", "-5"], ["delay"]),
    (["noop", "{}", "--delay", "inf"], ["delay"]),
    (["noop", "{}", "--delay", "1e12"], ["delay"]),
    (["noop", "{}", "--max-attempts", "99999999999"], ["max attempts"]),
    (["noop", "{}", "--priority", "99999"], ["priority"]),
    (["noop", "{}", "--bogus"], ["unrecognized arguments", "--bogus"]),
    (["noop", "{}", "--priority", "high"], ["--priority"]),
    (["nosuch", "{}", "--app", "ledger_app"], ["unknown job type 'nosuch'", "ledger_app"]),
    (["noop", "{}", "--app", "no_such_module_xyz"], ["cannot import app module"]),
    ([], ["give a job TYPE"]),
])
def test_bad_enqueue_input_is_one_line_and_inserts_nothing(migrated, clean_db, args, words):
    before = job_count(clean_db)
    result = run_cli("enqueue", *args, dsn=migrated)
    assert_refused(result, *words)
    assert job_count(clean_db) == before


@pytest.mark.parametrize("bad_line,words", [
    ("{not json", ["jobs.jsonl:3", "invalid JSON"]),
    ('["noop"]', ["jobs.jsonl:3", "JSON object"]),
    ('{"payload": {}}', ["jobs.jsonl:3", '"type"']),
    ('{"type": "noop", "colour": "red"}', ["jobs.jsonl:3", "unknown field 'colour'"]),
    ('{"type": "noop", "payload": [1]}', ["jobs.jsonl:3", "JSON object"]),
    ('{"type": "noop", "queue": "bad queue"}', ["jobs.jsonl:3", "invalid queue name"]),
    ('{"type": "noop", "max_attempts": 0}', ["jobs.jsonl:3", "max attempts"]),
    ('{"type": "noop", "delay": "soon"}', ["jobs.jsonl:3", "delay"]),
    ('{"type": "nosuch"}', ["unknown job type 'nosuch'"]),
])
def test_a_bad_line_in_a_jobs_file_inserts_nothing_from_it(migrated, clean_db, tmp_path,
                                                           bad_line, words):
    path = tmp_path / "jobs.jsonl"
    good = [json.dumps({"type": "noop", "key": f"file-{n}"}) for n in range(5)]
    path.write_text("\n".join(good[:2] + [bad_line] + good[2:]) + "\n")
    before = job_count(clean_db)
    result = run_cli("enqueue", "--app", "ledger_app", "--file", str(path), dsn=migrated)
    assert_refused(result, *words)
    assert job_count(clean_db) == before
    missing = run_cli("enqueue", "--file", str(tmp_path / "nope.jsonl"), dsn=migrated)
    assert_refused(missing, "cannot read", "nope.jsonl")
    both = run_cli("enqueue", "noop", "--file", str(path), dsn=migrated)
    assert_refused(both, "either")
    assert job_count(clean_db) == before


# --- failed, retry, show -----------------------------------------------------------------

def test_failed_lists_dead_jobs_without_payloads_and_retry_puts_them_back(migrated, clean_db,
                                                                          store):
    s = store()
    secret = "payload-secret-7f3a"
    dead_ids = [s.enqueue(new_job("permanent", {"secret": secret, "n": n}, queue="mail"))
                for n in range(3)]
    unknown = s.enqueue(new_job("no.such.type", {"secret": secret}))
    alive = s.enqueue(new_job("noop", {"secret": secret}, delay=3600))
    work = run_cli("work", "--app", "ledger_app", "--queues", "mail,default", "--stop-when-empty",
                   dsn=migrated)
    assert work.returncode == 0, work.stderr

    failed = run_cli("failed", dsn=migrated)
    assert failed.returncode == 0, failed.stderr
    assert secret not in failed.stdout and '"n"' not in failed.stdout
    rows = failed.stdout.strip().splitlines()[1:]
    listed = {int(line.split()[0]): line for line in rows}
    assert set(listed) == set(dead_ids) | {unknown}
    assert all("prefork.errors.PermanentError" in listed[i] and "mail" in listed[i]
               for i in dead_ids)
    assert "unknown job type" in listed[unknown]
    only_mail = run_cli("failed", "--queue", "mail", dsn=migrated)
    assert {int(line.split()[0]) for line in only_mail.stdout.strip().splitlines()[1:]} \
        == set(dead_ids)

    retry_one = run_cli("retry", str(dead_ids[0]), dsn=migrated)
    assert retry_one.stdout.strip() == "retried 1 job"
    row = job_row(clean_db, dead_ids[0])
    assert (row["status"], row["attempts"], row["finished_at"]) == ("ready", 0, None)
    assert job_row(clean_db, dead_ids[1])["status"] == "dead"

    retry_all = run_cli("retry", "--all", dsn=migrated)
    assert retry_all.stdout.strip() == "retried 3 jobs"
    assert {job_row(clean_db, i)["status"] for i in dead_ids + [unknown]} == {"ready"}
    assert job_row(clean_db, alive)["status"] == "ready"
    assert run_cli("failed", dsn=migrated).stdout.strip().count("\n") == 0  # header only

    for bad in (["retry"], ["retry", "--all", str(unknown)], ["retry", "abc"],
                ["failed", "--limit", "-1"]):
        assert_refused(run_cli(*bad, dsn=migrated))


def test_failed_marks_a_cut_error_and_show_prints_it_whole(migrated, clean_db, store):
    s = store()
    long_error = "ValueError: the invoice total does not match its lines (account 7)"
    errors = {s.enqueue(new_job("noop", key="short")): "Boom",
              s.enqueue(new_job("noop", key="long")): long_error}
    for job in s.claim(["default"], "host-a:10", 30, limit=2):
        s.fail(job, errors[job.id], Decision(dead=True, delay=0))
    failed = run_cli("failed", dsn=migrated)
    assert failed.returncode == 0, failed.stderr
    listed = {int(line.split()[0]): line for line in failed.stdout.splitlines()[1:]}
    (long_id,) = [job_id for job_id, error in errors.items() if error == long_error]
    (short_id,) = set(errors) - {long_id}
    assert f" {long_error[:31]}\u2026 " in listed[long_id] and "(account 7)" not in listed[long_id]
    assert " Boom " in listed[short_id] and "\u2026" not in listed[short_id]
    assert "show ID" in run_cli("failed", "--help", dsn=migrated).stdout
    shown = json.loads(run_cli("show", str(long_id), dsn=migrated).stdout)
    assert shown["last_error"] == long_error


def test_show_prints_one_job_as_json(migrated, clean_db, store):
    job_id = store().enqueue(new_job("noop", {"n": 5}, key="show-1", queue="mail"))
    result = run_cli("show", str(job_id), dsn=migrated)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert (shown["id"], shown["status"], shown["queue"], shown["idempotency_key"]) \
        == (job_id, "ready", "mail", "show-1")
    assert json.loads(shown["payload"]) == {"n": 5}
    assert_refused(run_cli("show", str(job_id + 1000), dsn=migrated), f"no job {job_id + 1000}")
    assert_refused(run_cli("show", "seven", dsn=migrated), "ID")


def test_show_says_when_a_ready_job_not_due_yet_runs(migrated, clean_db, store):
    s = store()
    due = s.enqueue(new_job("noop", key="due"))
    delayed = s.enqueue(new_job("noop", key="delayed", delay=3600))
    backing_off = s.enqueue(new_job("noop", key="backoff"))
    (job,) = s.claim(["default"], "host-a:10", 30)
    assert job.id == due
    s.complete(job)
    (job,) = s.claim(["default"], "host-a:10", 30)
    assert job.id == backing_off
    s.fail(job, "Boom", Decision(dead=False, delay=600))

    def shown(job_id):
        result = run_cli("show", str(job_id), dsn=migrated)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    retrying, waiting_first = shown(backing_off), shown(delayed)
    assert retrying["status"] == waiting_first["status"] == "ready"
    assert retrying["waiting"] == \
        f"retrying at {utc_text(datetime.fromisoformat(retrying['available_at']))}"
    assert waiting_first["waiting"].startswith("delayed until ")
    moment = datetime.fromisoformat(waiting_first["waiting"].removeprefix("delayed until "))
    assert moment.utcoffset() == timedelta(0)
    assert "waiting" not in shown(due)


# --- migrate --------------------------------------------------------------------------------

def test_migrate_twice_reports_up_to_date(fresh_database):
    dsn = dsn_for(fresh_database)
    first = run_cli("migrate", dsn=dsn)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().startswith("applied versions 1")
    second = run_cli("migrate", dsn=dsn)
    assert (second.returncode, second.stdout.strip()) == (0, "schema is up to date")
    enqueued = run_cli("enqueue", "noop", dsn=dsn)
    assert enqueued.returncode == 0 and int(enqueued.stdout) == 1


def test_two_migrations_started_at_once_both_succeed(fresh_database):
    dsn = dsn_for(fresh_database)
    procs = [subprocess.Popen([sys.executable, "-m", "prefork", "migrate"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=cli_env(dsn))
             for _ in range(2)]
    try:
        outputs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    said = sorted(out.strip() for out, _ in outputs)
    assert said[0].startswith("applied versions 1") and said[1] == "schema is up to date", said
    conn = admin_connection(database=fresh_database)
    try:
        versions = scalar(conn, "SELECT COUNT(*) FROM prefork_schema_migrations")
        applied = scalar(conn, "SELECT COUNT(*) FROM prefork_schema_migrations WHERE version = 1")
        assert applied == 1 and versions == len(said[0].split(" ", 2)[2].split(", "))
    finally:
        conn.close()


# --- config ------------------------------------------------------------------------------------

def test_config_masks_the_password_and_shows_sources(tmp_path):
    conf = tmp_path / "prefork.ini"
    conf.write_text("[prefork-queue]\npoll_interval = 2.5\n")
    result = run_cli("config", "--config", str(conf), "--max-attempts", "9",
                     PREFORK_QUEUE_DB_PASSWORD="pw-Secret-91", PREFORK_QUEUE_DSN=dsn_for("jobs"))
    assert result.returncode == 0, result.stderr
    assert "pw-Secret-91" not in result.stdout + result.stderr
    shown = {}
    for line in result.stdout.splitlines():
        setting, rest = line.split(" = ", 1)
        value, source = rest.rsplit("#", 1)
        shown[setting] = (value.strip(), source.strip())
    assert shown["db_password"] == ("********", "env")
    assert shown["dsn"] == (dsn_for("jobs"), "env")
    assert shown["max_attempts"] == ("9", "flag")
    assert shown["poll_interval"] == ("2.5", "file")
    assert shown["lease_seconds"] == ("60.0", "default")
    unset = run_cli("config")
    assert "db_password = " in unset.stdout and "********" not in unset.stdout


# --- least privilege ---------------------------------------------------------------------------

def test_worker_account_from_grants_can_enqueue_and_work_but_not_delete_or_drop(
        database, migrated, clean_db, tmp_path):
    user = f"pq_w_{uuid.uuid4().hex[:8]}"
    password = f"pw-{uuid.uuid4().hex}"
    grants = run_cli("grants", "--user", user, "--host", "127.0.0.1", "--database", database)
    assert grants.returncode == 0, grants.stderr
    statements = [line for line in grants.stdout.splitlines() if not line.startswith("--")]
    assert statements and all(line.startswith("GRANT ") for line in statements)
    assert not any(word in grants.stdout for word in ("DROP", "ALTER", "ALL PRIVILEGES"))
    # Its one DELETE: the limits a supervisor publishes, replaced at each start and reload.
    assert [line.split(" ON ")[1].split(" TO ")[0] for line in statements if "DELETE" in line] \
        == [f"`{database}`.`prefork_limits`"]
    admin = admin_connection()
    admin.cursor().execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
    try:
        for statement in statements:
            admin.cursor().execute(statement)
        dsn = dsn_for(database, user)
        password_file = tmp_path / "db-password"
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)   # a group- or world-readable password file is refused

        first = run_cli("enqueue", "noop", '{"n": 1}', "--key", "lp-1", dsn=dsn,
                        PREFORK_QUEUE_DB_PASSWORD=password)
        second = run_cli("enqueue", "noop", '{"n": 2}', "--key", "lp-2",
                         "--db-password-file", str(password_file), dsn=dsn)
        dead = run_cli("enqueue", "permanent", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=password)
        assert [r.returncode for r in (first, second, dead)] == [0, 0, 0], \
            [r.stderr for r in (first, second, dead)]
        work = run_cli("work", "--app", "ledger_app", "--stop-when-empty",
                       "--db-password-file", str(password_file), dsn=dsn)
        assert work.returncode == 0, work.stderr
        statuses = {job_row(clean_db, int(r.stdout))["status"] for r in (first, second)}
        assert statuses == {"done"} and job_row(clean_db, int(dead.stdout))["status"] == "dead"
        retried = run_cli("retry", "--all", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=password)
        assert retried.stdout.strip() == "retried 1 job", retried.stderr
        assert password not in work.stderr + first.stderr + retried.stderr

        wrong = run_cli("enqueue", "noop", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD="wrong")
        assert_refused(wrong, "cannot connect", user, exit_code=DATABASE_ERROR)
        before = job_count(clean_db)
        as_worker = pymysql.connect(host=SERVER["host"], port=SERVER["port"], user=user,
                                    password=password, database=database, autocommit=True)
        try:
            for sql in ("DELETE FROM prefork_jobs", "DROP TABLE prefork_jobs",
                        "TRUNCATE prefork_jobs", "ALTER TABLE prefork_jobs ADD COLUMN x INT",
                        "UPDATE prefork_schema_migrations SET version = 99"):
                with pytest.raises(pymysql.err.MySQLError) as refused:
                    as_worker.cursor().execute(sql)
                assert refused.value.args[0] in (1142, 1044), (sql, refused.value.args)
        finally:
            as_worker.close()
        assert job_count(clean_db) == before
        migrate = run_cli("migrate", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=password)
        assert_refused(migrate, "database error", exit_code=DATABASE_ERROR)   # no CREATE
    finally:
        admin.cursor().execute("DROP USER IF EXISTS %s@'127.0.0.1'", (user,))
        admin.close()


@pytest.mark.parametrize("option, value", [("--user", "bob\n"), ("--host", "%\n"),
                                           ("--database", "jobs\n"), ("--user", "bob'--")])
def test_grants_refuses_a_name_with_a_newline_or_a_quote_and_prints_nothing(option, value):
    result = run_cli("grants", "--database", "jobs", option, value)
    assert_refused(result, f"invalid {option[2:]} name")
