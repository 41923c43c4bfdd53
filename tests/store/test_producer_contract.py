"""The job table contract (docs/reference/job-table-contract.md), kept by a real
producer in another language: the PHP class of docs/howto/other-languages.md, run by
php-cli through PDO, on MariaDB (as an account with only the contract's GRANTs) and
on SQLite, beside a real supervisor.

The statements are read from the pages, never copied here: they must be the store's
own, the PHP class must run exactly them, and the contract's version and the schema
it was checked against must be the code's. The supervisor polls every POLL seconds
and hears no doorbell, so a job picked up within PICKED_UP_WITHIN was rung awake by
the PHP producer's datagram."""
import json
import re
import shutil
import sqlite3
import subprocess
import uuid
from contextlib import closing
from datetime import datetime, timedelta, timezone

import pytest
from conftest import ROOT, SERVER, admin_connection, mysql_dsn, run_cli, scratch_database
from conftest import wait_until
from harness import SupervisorProcess

from prefork.store.contract import packaged_migrations
from prefork.store.mysql import queries as mysql_queries
from prefork.store.producer_contract import CHECKED_SCHEMA, CONTRACT_VERSION, FIRST_SCHEMA
from prefork.store.sqlite import queries as sqlite_queries
from prefork.store.sqlite.file import parse_dsn

REFERENCE = ROOT / "docs" / "reference" / "job-table-contract.md"
HOWTO = ROOT / "docs" / "howto" / "other-languages.md"
PRODUCER = ROOT / "tests" / "apps" / "php_producer.php"
SQL_BLOCK = re.compile(r"```\{code-block\} sql\n:name: ([\w-]+)\n(.*?)\n```", re.S)
PHP_BLOCK = re.compile(r"```php\n(<\?php\n.*?)\n```", re.S)
PHP_SQL = re.compile(r"const (\w+) = <<<'SQL'\n(.*?)\n\s*SQL;", re.S)
CONTRACT_VERSION_TEXT = re.compile(r"contract version (\d+)", re.I)
# The statements of the PHP class, and the reference page's blocks they must be.
PHP_STATEMENTS = {"MYSQL_ENQUEUE": "contract-mysql-enqueue",
                  "SQLITE_ENQUEUE": "contract-sqlite-enqueue",
                  "SQLITE_EXISTING_JOB": "contract-sqlite-existing-job",
                  "WAKEUP_PEERS": "contract-wakeup-peers"}
POLL = 600.0              # seconds between the supervisor's polls: no poll within the test
PICKED_UP_WITHIN = 60.0   # seconds: a rung job, on a loaded machine, with a wide margin
# PHP's clock set to a zone 14 hours from UTC: a time written in local time shows.
PHP = ["php", "-d", "date.timezone=Pacific/Kiritimati", "-d", "error_reporting=E_ALL",
       "-d", "display_errors=stderr"]


def documented():
    """{name: SQL} of the reference page's named SQL blocks."""
    return dict(SQL_BLOCK.findall(REFERENCE.read_text()))


def words(sql):
    return " ".join(sql.split())


def php_class():
    blocks = PHP_BLOCK.findall(HOWTO.read_text())
    assert blocks and "final class PreforkProducer" in blocks[0], "no PHP class on the how-to"
    return blocks[0]


def test_the_documented_statements_are_the_stores_own():
    sql = documented()
    assert words(sql["contract-mysql-enqueue"]).replace("?", "%s") == \
        words(mysql_queries.ENQUEUE)
    assert words(sql["contract-sqlite-enqueue"]) == words(sqlite_queries.ENQUEUE)
    assert words(sql["contract-sqlite-existing-job"]) == words(sqlite_queries.EXISTING_JOB)


def test_the_php_class_runs_exactly_the_documented_statements():
    sql = documented()
    in_php = dict(PHP_SQL.findall(php_class()))
    assert sorted(in_php) == sorted(PHP_STATEMENTS)
    for constant, name in PHP_STATEMENTS.items():
        assert words(in_php[constant]) == words(sql[name]), constant


def test_the_contract_version_and_the_schema_it_was_checked_against_are_the_codes():
    for page in (REFERENCE, HOWTO):
        versions = {int(found) for found in CONTRACT_VERSION_TEXT.findall(page.read_text())}
        assert versions == {CONTRACT_VERSION}, page.name
    assert f"schema version {FIRST_SCHEMA} and later" in REFERENCE.read_text()
    newest = {dialect: max(version for version, _, _ in packaged_migrations(dialect))
              for dialect in CHECKED_SCHEMA}
    assert CHECKED_SCHEMA == newest, (
        "a new migration: check it against docs/reference/job-table-contract.md, raise "
        "CONTRACT_VERSION if it changes what the page promises, and record its number in "
        "prefork/store/producer_contract.py's CHECKED_SCHEMA")


# --- a PHP producer beside a real supervisor -----------------------------------------------

class MySQLQueue:
    """A fresh migrated database (its registry holds our supervisor only), and a producer
    account with exactly the reference page's GRANTs."""

    def __init__(self, name):
        self.name, self.dsn = name, mysql_dsn(name)
        migrated = run_cli("migrate", dsn=self.dsn)
        assert migrated.returncode == 0, migrated.stderr
        self.user, self.password = f"pq_php_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        self.admin = admin_connection(database=name)
        with self.admin.cursor() as cursor:
            cursor.execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s",
                           (self.user, self.password))
            for grant in documented()["contract-mysql-grants"].strip().split(";\n"):
                cursor.execute(grant.rstrip(";").replace("`DATABASE`", f"`{name}`")
                               .replace("'USER'@'HOST'", f"'{self.user}'@'127.0.0.1'"))
        self.pdo_dsn = (f"mysql:host={SERVER['host']};port={SERVER['port']};dbname={name};"
                        "charset=utf8mb4")
        self.env = {"PRODUCER_USER": self.user, "PRODUCER_PASSWORD": self.password}

    def rows(self, sql, args=()):
        with self.admin.cursor() as cursor:
            cursor.execute(sql, args)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def utc_now(self):
        return self.rows("SELECT UTC_TIMESTAMP(6) AS now")[0]["now"]

    def close(self):
        with self.admin.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS %s@'127.0.0.1'", (self.user,))
        self.admin.close()


class SQLiteQueue:
    """A migrated SQLite file on this host."""

    def __init__(self, dsn):
        self.dsn, self.path = dsn, parse_dsn(dsn)
        self.pdo_dsn, self.env = f"sqlite:{self.path}", {}

    def rows(self, sql, args=()):
        with closing(sqlite3.connect(self.path, timeout=10)) as conn:
            cursor = conn.execute(sql.replace("%s", "?"), args)
            names = [column[0] for column in cursor.description]
            found = [dict(zip(names, row)) for row in cursor.fetchall()]
        for row in found:   # stored text -> naive UTC datetimes, as PyMySQL reads them
            for name in ("created_at", "available_at", "updated_at"):
                if isinstance(row.get(name), str):
                    row[name] = datetime.fromisoformat(row[name])
        return found

    def utc_now(self):
        return datetime.now(timezone.utc).replace(tzinfo=None)

    def close(self):
        pass


@pytest.fixture(params=["mysql", "sqlite"])
def queue(request, tmp_path):
    if shutil.which("php") is None:
        pytest.skip("php-cli is not installed (the README's apt-get line installs it)")
    if request.param == "mysql":
        request.getfixturevalue("mysql_server")
        with scratch_database("pq_php") as name:
            opened = MySQLQueue(name)
            yield opened
            opened.close()
    else:
        opened = SQLiteQueue(request.getfixturevalue("sqlite_migrated"))
        yield opened


def php_enqueue(database, class_file, **job):
    """Run the PHP producer for one job; (schema version it read, job id)."""
    result = subprocess.run(
        [*PHP, str(PRODUCER), str(class_file), database.pdo_dsn, json.dumps(job)],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", **database.env,
             "SCHEMA_VERSION_SQL": documented()["contract-schema-version"]})
    assert result.returncode == 0 and not result.stderr, result.stdout + result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    return int(lines["schema"]), int(lines["id"])


def job_status(queue, job_id):
    return queue.rows("SELECT status FROM prefork_jobs WHERE id = %s", (job_id,))[0]["status"]


def wait_done(queue, job_id):
    wait_until(lambda: job_status(queue, job_id) == "done", timeout=PICKED_UP_WITHIN,
               interval=0.05, message=f"job {job_id} picked up and done")


def test_a_php_producer_enqueues_idempotently_and_its_ring_wakes_the_supervisor(
        queue, tmp_path):
    class_file = tmp_path / "PreforkProducer.php"
    class_file.write_text(php_class())
    ran = tmp_path / "ran.log"   # the tally handler appends the id of each job it runs
    payload = {"log": str(ran), "note": "Grüße/ü \"quoted\"", "items": [], "ratio": 1.0}
    sup = SupervisorProcess(tmp_path, queue.dsn, "--app", "supervised_app", "--queues",
                            "mail", "--workers", "1", "--poll-interval", str(POLL),
                            "--doorbell", "false", "--wakeup-bind", "127.0.0.1:0")
    try:
        sup.wait_event("supervisor_registered", timeout=30)
        sup.wait_event("worker_ready", timeout=60)
        # A first job settles the supervisor's start (its first look may come after it).
        schema, first = php_enqueue(queue, class_file, type="tally", payload=payload,
                                    queue="mail", key="php-first", ring=True)
        assert schema >= FIRST_SCHEMA
        wait_done(queue, first)

        _, job_id = php_enqueue(queue, class_file, type="tally", payload=payload,
                                queue="mail", key="php-order-7")
        row = queue.rows("SELECT * FROM prefork_jobs WHERE id = %s", (job_id,))[0]
        assert (row["status"], row["attempts"], row["queue"], row["job_type"],
                row["idempotency_key"], row["priority"], row["max_attempts"],
                row["concurrency_key"], row["limited"]) == \
            ("ready", 0, "mail", "tally", "php-order-7", 0, 5, "", 0)
        assert json.loads(row["payload"]) == payload
        assert row["available_at"] == row["created_at"] == row["updated_at"]
        assert timedelta(0) <= queue.utc_now() - row["created_at"] < timedelta(minutes=5)

        # The same queue and key: the same job, and this time its ring wakes the supervisor.
        _, again = php_enqueue(queue, class_file, type="tally", payload={"log": "elsewhere"},
                               queue="mail", key="php-order-7", ring=True)
        assert again == job_id
        wait_done(queue, job_id)
        assert ran.read_text().split() == [str(first), str(job_id)]
        assert queue.rows("SELECT COUNT(*) AS n FROM prefork_jobs WHERE idempotency_key = %s",
                          ("php-order-7",))[0]["n"] == 1

        # A delayed job waits its delay, counted from the database's clock.
        _, later = php_enqueue(queue, class_file, type="tally", payload=payload,
                               queue="later", delay=3600)
        row = queue.rows("SELECT * FROM prefork_jobs WHERE id = %s", (later,))[0]
        assert row["available_at"] - row["created_at"] == timedelta(hours=1)
    finally:
        sup.kill_all()
