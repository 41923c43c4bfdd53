"""`prefork-queue doctor`, through the real CLI (a subprocess) against the local
MariaDB, in both dialects, and against a SQLite file; then the decisions its
checks make from what a server says (versions, grants, plans, clocks), on the
words real servers print."""
import json
import re
import uuid

import pytest
from conftest import SERVER, admin_connection, mysql_dsn, run_cli, scalar, scratch_database
from tcp_proxy import TcpProxy
from throwaway_db import free_port

from prefork.doctor.checks import Status
from prefork.doctor.grants import judge
from prefork.doctor.mysql import judge_skew, server_check
from prefork.doctor.plans import judge_rows
from prefork.doctor.sqlite import judge_plan
from prefork.jobs import new_job
from prefork.store.mysql.server import parse_version

DATABASE_EXIT = 3
PASSWORD = "doctor-Pw-1"


def doctor(*args, dsn, **extra_env):
    return run_cli("doctor", *args, dsn=dsn, **extra_env)


def checks_of(result):
    """{check name: (status, detail)} from `doctor --json`'s output."""
    return {entry["check"]: (entry["status"], entry["detail"])
            for entry in json.loads(result.stdout)}


def scratch_jobs(database):
    conn = admin_connection(database=database)
    try:
        return scalar(conn, "SELECT COUNT(*) FROM prefork_jobs WHERE queue LIKE 'prefork-doctor-%'")
    finally:
        conn.close()


# --- MariaDB, both dialects --------------------------------------------------------

@pytest.mark.parametrize("sql_dialect", ["mariadb", "mysql"])
def test_doctor_passes_on_the_local_mariadb_in_both_dialects(migrated, sql_dialect):
    database = migrated.rsplit("/", 1)[1]
    result = doctor("--json", "--dialect", sql_dialect, dsn=migrated)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result)
    assert set(checks) == {"server", "dialect", "schema", "privileges", "isolation",
                           "time zone", "clock", "topology", "binary log", "claim plan",
                           "completion plan", "round trip"}
    # root has everything: more than a worker needs is a warning, nothing fails.
    assert checks["privileges"][0] == "warn" and "ALL PRIVILEGES ON *.*" in checks["privileges"][1]
    assert {name: status for name, (status, _) in checks.items() if name != "privileges"} == \
        dict.fromkeys(set(checks) - {"privileges"}, "ok")
    assert checks["server"][1].startswith("MariaDB 10.")
    assert checks["dialect"][1].startswith(f"{sql_dialect} (dialect = {sql_dialect}")
    assert "ix_prefork_jobs_claim" in checks["claim plan"][1]
    assert checks["isolation"][1].startswith("READ-COMMITTED")
    assert "; removed (an id is never reused" in checks["round trip"][1]
    assert scratch_jobs(database) == 0   # neither the plan's jobs nor the round trip's stay


def test_on_a_fresh_database_doctor_takes_one_job_id_and_says_so(migrated, clean_db, store):
    """The plans' 200 scratch jobs go into a temporary copy of prefork_jobs: only the
    round trip's job takes an id of the real table (a rolled-back insert would move
    its AUTO_INCREMENT on all the same), and its line says so."""
    result = doctor("--json", dsn=migrated)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result)
    for plan in ("claim plan", "completion plan"):
        assert checks[plan][0] == "ok" and "ids on" not in checks[plan][1], checks[plan]
    assert checks["round trip"][1].startswith("job 1 enqueued, claimed and completed")
    assert checks["round trip"][1].endswith("removed (an id is never reused: the next job's "
                                            "is above 1)")
    assert store().enqueue(new_job("noop")) == 2
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs") == 1


def test_doctor_prints_one_line_per_check(migrated):
    result = doctor(dsn=migrated)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "no check failed"
    assert [line.split()[0] for line in lines[:-1]] == \
        ["ok", "ok", "ok", "warn", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok"]
    assert result.stderr == ""


@pytest.fixture
def empty_database(mysql_server):
    with scratch_database("pq_doctor") as name:
        yield mysql_dsn(name)


def test_no_schema_fails_and_says_to_run_migrate(empty_database):
    result = doctor("--json", dsn=empty_database)
    assert result.returncode == DATABASE_EXIT, result.stderr
    checks = checks_of(result)
    assert checks["schema"][0] == "fail"
    assert "no queue database at" in checks["schema"][1] and "run migrate" in checks["schema"][1]
    # What needs the tables is not run; what does not is.
    assert [checks[name][0] for name in ("claim plan", "completion plan", "round trip")] == \
        ["skip"] * 3
    assert checks["isolation"][0] == "ok"


def test_an_unreachable_server_is_a_failed_connect(mysql_server):
    dsn = f"mysql://root@127.0.0.1:{free_port()}/jobs"
    result = doctor(dsn=dsn)
    assert result.returncode == DATABASE_EXIT
    assert result.stdout.splitlines()[0].startswith("fail  connect  cannot connect to ")
    assert "Traceback" not in result.stderr
    as_json = doctor("--json", dsn=dsn)
    assert as_json.returncode == DATABASE_EXIT
    (only,) = json.loads(as_json.stdout)
    assert only["check"] == "connect" and only["status"] == "fail"
    assert only["detail"].startswith("cannot connect to mysql://root@127.0.0.1:")


class OldGreeting:
    """A socket's sendall that rewrites the server's greeting once: MariaDB 10.x or
    11.x announces itself as 0.x or 1.x (the same length, so the packet stays valid)."""

    def __init__(self, sock):
        self.sock = sock
        self.greeted = False

    def sendall(self, data):
        if not self.greeted:
            self.greeted = True
            data = re.sub(rb"5\.5\.5-1(\d)\.", rb"5.5.5-0\1.", data, count=1)
        self.sock.sendall(data)


class OldServerProxy(TcpProxy):
    """The local MariaDB behind a proxy whose greeting names a server too old."""

    def _pump(self, source, sink, pair):
        super()._pump(source, OldGreeting(sink) if source is pair[1] else sink, pair)


def test_a_server_too_old_is_a_failed_connect_naming_both_versions(mysql_server, database):
    with OldServerProxy(SERVER["host"], SERVER["port"]) as proxy:
        result = doctor(dsn=f"mysql://root@127.0.0.1:{proxy.port}/{database}")
    assert result.returncode == DATABASE_EXIT, result.stdout + result.stderr
    line = result.stdout.splitlines()[0]
    assert line.startswith("fail  connect  MariaDB ") and "is too old for prefork-queue" in line
    assert line.endswith("it needs MariaDB 10.6.0 or later (SKIP LOCKED)")


def test_a_bad_dsn_is_a_usage_error_not_a_check(mysql_server):
    result = doctor(dsn="mysql://root@127.0.0.1:3306/")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == ("prefork-queue: error: bad DSN: name the database, "
                                     "e.g. mysql://user@127.0.0.1:3306/jobs")


# --- a worker account, made from what `grants` prints ------------------------------------

@pytest.fixture
def worker_account(migrated):
    """make(drop=...) -> a DSN for a new account granted what `prefork-queue grants`
    prints, minus the (table, privilege) pairs in `drop`; every account is
    dropped at the end, and the scratch jobs it could not delete are removed."""
    database = migrated.rsplit("/", 1)[1]
    made = []
    admin = admin_connection(database=database)

    def make(drop=()):
        user = f"pq_doc_{uuid.uuid4().hex[:8]}"
        made.append(user)
        printed = run_cli("grants", "--user", user, "--host", "%", dsn=migrated)
        assert printed.returncode == 0, printed.stderr
        statements = [line for line in printed.stdout.splitlines() if line.startswith("GRANT")]
        assert len(statements) == 10   # the eight worker tables, the rules, the migrations
        with admin.cursor() as cursor:
            cursor.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, PASSWORD))
            for statement in statements:
                for table, privilege in drop:
                    if f"`{table}`" in statement:
                        statement = statement.replace(f", {privilege}", "")
                cursor.execute(statement)
        return f"mysql://{user}@{SERVER['host']}:{SERVER['port']}/{database}"

    yield make
    with admin.cursor() as cursor:
        for user in made:
            cursor.execute("DROP USER IF EXISTS %s@'%%'", (user,))
        cursor.execute("DELETE FROM prefork_jobs WHERE queue LIKE 'prefork-doctor-%'")
    admin.close()


def test_the_least_privileged_worker_passes_and_its_scratch_job_is_left_done(worker_account,
                                                                              migrated):
    dsn = worker_account()
    result = doctor("--json", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=PASSWORD)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result)
    assert checks["privileges"][0] == "ok", checks["privileges"]
    for plan in ("claim plan", "completion plan"):   # no temporary table: the real one's ids
        assert checks[plan][0] == "ok", checks[plan]
        assert "the 200 scratch jobs, rolled back, moved prefork_jobs' ids on by 200 (this " \
               "account may not create a temporary table" in checks[plan][1]
    status, detail = checks["round trip"]
    assert status == "ok"
    assert "is left done in queue prefork-doctor-" in detail and "prune" in detail
    queue = detail.split("in queue ")[1].split(",")[0]
    conn = admin_connection(database=migrated.rsplit("/", 1)[1])
    try:
        assert scalar(conn, "SELECT status FROM prefork_jobs WHERE queue = %s", (queue,)) == "done"
    finally:
        conn.close()


def test_an_account_without_update_fails_naming_the_table(worker_account):
    dsn = worker_account(drop=[("prefork_jobs", "UPDATE")])
    result = doctor(dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=PASSWORD)
    assert result.returncode == DATABASE_EXIT, result.stdout + result.stderr
    lines = {line.split()[1]: line for line in result.stdout.splitlines() if "  " in line}
    assert lines["privileges"].startswith("fail")
    assert "lacks UPDATE on prefork_jobs:" in lines["privileges"]
    assert "prefork-queue grants" in lines["privileges"]
    # And the round trip shows what that does to a claim, in one line.
    # Its enqueue needs UPDATE too (ON DUPLICATE KEY UPDATE keeps one job per key).
    round_trip = next(line for line in result.stdout.splitlines() if " round trip " in line)
    assert round_trip.startswith("fail  round trip       enqueue: database error ")
    assert "UPDATE command denied" in round_trip
    assert "Traceback" not in result.stdout + result.stderr


# --- SQLite ----------------------------------------------------------------------------------

def test_doctor_passes_on_a_sqlite_file(sqlite_migrated):
    result = doctor("--json", dsn=sqlite_migrated)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result)
    assert list(checks) == ["sqlite", "file", "schema", "claim plan", "completion plan",
                            "round trip"]
    assert {status for status, _ in checks.values()} == {"ok"}
    assert "ix_prefork_jobs_claim" in checks["claim plan"][1]
    assert checks["round trip"][1].endswith("removed (an id is never reused: the next "
                                            "job's is above 1)")


def test_a_missing_sqlite_file_fails_the_schema_check_and_is_not_created(tmp_path):
    path = tmp_path / "absent.db"
    result = doctor(dsn=f"sqlite:///{path}")
    assert result.returncode == DATABASE_EXIT
    assert result.stdout.splitlines()[0].startswith("fail  schema  no queue database at ")
    assert not path.exists()


# --- the decisions, on what servers print --------------------------------------------------

@pytest.mark.parametrize("version, minimum", [("5.7.44", "8.0.1"), ("8.0.0", "8.0.1"),
                                              ("10.5.22-MariaDB", "10.6.0")])
def test_a_server_too_old_fails_naming_its_version_and_the_minimum(version, minimum):
    check = server_check(parse_version(version))
    assert check.status is Status.FAIL
    assert version.split("-")[0] in check.detail and minimum in check.detail


@pytest.mark.parametrize("version", ["8.0.36", "8.4.3", "5.5.5-10.6.16-MariaDB-log"])
def test_a_server_with_skip_locked_passes(version):
    assert server_check(parse_version(version)).status is Status.OK


def worker_grants(database="jobs", drop=None):
    tables = ["prefork_jobs", "prefork_processes", "prefork_queue_states", "prefork_restarts",
              "prefork_minutes", "prefork_task_results", "prefork_limit_groups",
              "prefork_workflows"]
    lines = ["GRANT USAGE ON *.* TO `w`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E3'"]
    lines += [f"GRANT SELECT, INSERT{'' if table == drop else ', UPDATE'} ON `{database}`.`{table}`"
              " TO `w`@`%`" for table in tables]
    lines.append(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{database}`.`prefork_limits` TO `w`@`%`")
    return lines + [f"GRANT SELECT ON `{database}`.`prefork_schema_migrations` TO `w`@`%`"]


def test_grants_exactly_as_printed_are_ok_and_the_password_hash_is_never_shown():
    check = judge(worker_grants(), "jobs", "w@%")
    assert check.status is Status.OK
    assert "D821809F" not in check.detail


def test_a_missing_privilege_fails_naming_table_and_privilege():
    check = judge(worker_grants(drop="prefork_restarts"), "jobs", "w@%")
    assert check.status is Status.FAIL
    assert "lacks UPDATE on prefork_restarts:" in check.detail


@pytest.mark.parametrize("extra, shown", [
    ("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION",
     "ALL PRIVILEGES ON *.* WITH GRANT OPTION"),
    ("GRANT DELETE ON `jobs`.`prefork_jobs` TO `w`@`%`", "DELETE ON `jobs`.prefork_jobs"),
    ("GRANT CREATE, DROP ON `jobs`.* TO `w`@`%`", "CREATE, DROP ON `jobs`.*"),
])
def test_more_than_a_worker_needs_is_a_warning(extra, shown):
    check = judge(worker_grants() + [extra], "jobs", "w@%")
    assert check.status is Status.WARN
    assert shown in check.detail and "least privilege" in check.detail


def test_a_database_pattern_grant_counts_for_the_databases_it_matches():
    lines = ["GRANT SELECT, INSERT, UPDATE, DELETE ON `jo%`.* TO `w`@`%`"]
    check = judge(lines, "jobs", "w@%")
    assert check.status is Status.WARN   # nothing missing, but a whole database
    assert judge(lines, "other", "w@%").status is Status.FAIL


def test_an_escaped_wildcard_in_a_database_grant_is_a_plain_character():
    lines = worker_grants() + ["GRANT DELETE ON `jo\\_s`.* TO `w`@`%`"]
    assert judge(lines, "jobs", "w@%").status is Status.OK        # another database
    assert judge(worker_grants("jo_s") + lines[-1:], "jo_s", "w@%").status is Status.WARN


def test_column_grants_and_the_application_tables_are_not_counted():
    lines = worker_grants(drop="prefork_jobs") + [
        "GRANT UPDATE (`status`) ON `jobs`.`prefork_jobs` TO `w`@`%`",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `jobs`.`ledger` TO `w`@`%`"]
    check = judge(lines, "jobs", "w@%")
    assert check.status is Status.FAIL and "lacks UPDATE on prefork_jobs" in check.detail


def test_missing_privileges_with_roles_are_a_warning_naming_the_roles():
    check = judge(worker_grants(drop="prefork_jobs") + ["GRANT `queue_role` TO `w`@`%`"],
                  "jobs", "w@%")
    assert check.status is Status.WARN and "`queue_role`" in check.detail


@pytest.mark.parametrize("skew, margin, status", [
    (0.2, 0.001, Status.OK), (-2.0, 0.001, Status.WARN), (1.3, 0.5, Status.OK), (0.9, 0.9, Status.OK),
    (20.0, 0.001, Status.FAIL), (-16.0, 0.001, Status.FAIL), (14.0, 0.001, Status.WARN)])
def test_clock_skew_warns_over_a_second_and_fails_over_a_quarter_lease(skew, margin, status):
    check = judge_skew(skew, margin, lease_seconds=60)
    assert check.status is status
    if abs(skew) > margin:
        assert ("behind" if skew > 0 else "ahead of") in check.detail
    else:
        assert "agree to within 1800.0 ms" in check.detail


def test_a_plan_with_a_filesort_a_full_scan_or_another_index_is_named():
    rows = [{"table": "prefork_jobs", "type": "ALL", "key": None, "Extra": "Using where; Using filesort"},
            {"table": "j", "type": "ref", "key": "ix_prefork_jobs_lease", "Extra": ""},
            {"table": "<derived2>", "type": "ALL", "key": None, "Extra": ""},
            {"table": "claimed", "type": "ALL", "key": None,
             "Extra": "Table function: json_table; Using where"}]
    problems, _ = judge_rows(rows, {"prefork_jobs": "ix_prefork_jobs_claim", "j": "PRIMARY"})
    assert problems == ["prefork_jobs: Using filesort", "prefork_jobs: full table scan (type ALL)",
                        "prefork_jobs: key none, expected ix_prefork_jobs_claim",
                        "j: key ix_prefork_jobs_lease, expected PRIMARY"]


def test_a_sqlite_plan_with_a_scan_or_a_sort_is_named():
    assert judge_plan(["SCAN prefork_jobs", "USE TEMP B-TREE FOR ORDER BY"], "ix_x") == [
        "full scan (SCAN prefork_jobs)", "sort (USE TEMP B-TREE FOR ORDER BY)"]
    assert judge_plan(["SEARCH prefork_jobs USING INDEX ix_x (status=?)"], "ix_x") == []
