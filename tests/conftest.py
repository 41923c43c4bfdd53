"""Shared fixtures: a real MariaDB/MySQL server, a fresh database per test run,
and a fresh SQLite file per test.

The server on 127.0.0.1:3306 is started when it is not running. Nothing here
depends on what an earlier run left behind: each run creates its own database
and drops it at the end.

`store`, `clean_db`, `make_config`, `migrated` and `dsn` are MySQL's. For the
contract suite that runs on every backend, `backend` is parametrized, and
`backend_store` (an opener like `store`) and `db` (a TestDatabase) follow it.

MySQL runs in two SQL dialects (the `dialect` setting). The modules named in
DIALECT_MODULES run their MySQL tests in both, forced: test ids say which
(`mariadb_dialect`, `mysql_dialect`); the stores a test opens and the commands
it runs (through PREFORK_QUEUE_DIALECT in their environment) speak it. Other
tests speak what PREFORK_QUEUE_DIALECT says (auto when unset): with
PREFORK_QUEUE_DIALECT=mysql the whole suite runs in the mysql dialect.

Likewise PREFORK_QUEUE_CLAIMER reaches the commands the tests run: with
PREFORK_QUEUE_CLAIMER=supervisor every supervisor of the suite claims for its
children (the `claimer` setting), unless a test sets it itself.
"""
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing, contextmanager
from pathlib import Path

import pymysql
import pytest
from polling import poll_until

from prefork import config as config_module, logs
from prefork.store.mysql.store import MySQLStore
from prefork.store.sqlite.file import decode_times, parse_dsn
from prefork.store.sqlite.store import SQLiteStore

BACKENDS = ("mysql", "sqlite")

# The store, worker, supervisor and cluster suites: run under both MySQL dialects.
DIALECT_MODULES = {"test_store.py", "test_worker.py", "test_supervisor.py",
                   "test_hardening_supervisor.py", "test_cluster.py", "test_orphans.py",
                   "test_operations.py", "test_both_backends.py",
                   "test_limits_store.py", "test_cancel_store.py",
                   "test_bulk_enqueue.py", "test_claim_scale.py", "test_results.py",
                   "test_workflows_store.py"}
DIALECTS = ("mariadb", "mysql")
DIALECT_ENV = "PREFORK_QUEUE_DIALECT"
CLAIMER_ENV = "PREFORK_QUEUE_CLAIMER"

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "apps"
SERVER = {"host": os.environ.get("PREFORK_TEST_DB_HOST", "127.0.0.1"),
          "port": int(os.environ.get("PREFORK_TEST_DB_PORT", "3306")),
          "user": os.environ.get("PREFORK_TEST_DB_USER", "root")}
START_SERVER = ["start-stop-daemon", "--start", "--oknodo", "--background",
                "--exec", "/usr/sbin/mariadbd"]


FAST = Path(__file__).resolve().parent / "fast"


def pytest_generate_tests(metafunc):
    """`backend` takes every backend; in DIALECT_MODULES, a test on MySQL runs in
    each dialect (the `dialect` fixture, indirect)."""
    both = Path(metafunc.definition.path).name in DIALECT_MODULES
    if "backend" in metafunc.fixturenames:
        dialects = DIALECTS if both else (None,)
        cases = [(backend, name) for backend in BACKENDS
                 for name in (dialects if backend == "mysql" else (None,))]
        metafunc.parametrize(("backend", "dialect"), cases, indirect=True,
                             ids=[_case_id(*case) for case in cases])
    elif both and "mysql_server" in metafunc.fixturenames:
        metafunc.parametrize("dialect", DIALECTS, indirect=True,
                             ids=[f"{name}_dialect" for name in DIALECTS])


def _case_id(backend, dialect):
    return f"{backend}-{dialect}_dialect" if dialect else backend


def pytest_collection_modifyitems(items):
    """tests/fast/ is the fast tier (`pytest -m fast`): pure decisions, no process or database."""
    for item in items:
        if FAST in Path(item.fspath).parents:
            item.add_marker(pytest.mark.fast)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skipped test is a failed test: CI must not pass by skipping."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") == "true" and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} was skipped; under CI=true a skip is a failure"


@pytest.fixture
def logged():
    """The records the package logger emits during the test."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    keep, saved_level = Keep(), logs.LOGGER.level
    logs.LOGGER.addHandler(keep)
    logs.LOGGER.setLevel(logging.DEBUG)
    yield records
    logs.LOGGER.removeHandler(keep)
    logs.LOGGER.setLevel(saved_level)


def admin_connection(database=None, **overrides):
    args = dict(SERVER, password="", autocommit=True, connect_timeout=2, database=database)
    args.update(overrides)
    return pymysql.connect(**args)


def wait_until(predicate, timeout=10.0, interval=0.02, message="condition"):
    """Poll `predicate` until it returns a truthy value; fail the test after `timeout` seconds."""
    return poll_until(predicate, timeout, interval, message, error=AssertionError)


def _server_up():
    try:
        admin_connection().close()
        return True
    except pymysql.err.OperationalError:
        return False


@pytest.fixture(scope="session")
def mysql_server():
    if not _server_up():
        subprocess.run(START_SERVER, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(_server_up, timeout=60, interval=0.25, message="MariaDB to start")
    return SERVER


@contextmanager
def scratch_database(prefix):
    """A new empty database on the server (`prefix_<pid>_<random>`: runs side by side
    never meet), yielded by name and dropped on exit."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with closing(admin_connection()) as admin:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}`")
        try:
            yield name
        finally:
            with admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")


def mysql_dsn(database):
    """The DSN of `database` on the test server, as root (no password)."""
    return f"mysql://{SERVER['user']}@{SERVER['host']}:{SERVER['port']}/{database}"


@pytest.fixture
def bell_base(monkeypatch):
    """A short private base for the bell directories (a socket's path must fit 108 bytes),
    for this process's rings and, passed as XDG_RUNTIME_DIR, a supervisor's bell alike."""
    base = Path(tempfile.mkdtemp(prefix="pqbell"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def database(mysql_server):
    with scratch_database("pq_test") as name:
        yield name


@pytest.fixture(scope="session")
def dsn(database):
    return mysql_dsn(database)


@pytest.fixture(autouse=True)
def dialect(request, monkeypatch):
    """The MySQL dialect this test speaks: the one it is parametrized with (set in
    PREFORK_QUEUE_DIALECT for the commands it runs), else PREFORK_QUEUE_DIALECT's."""
    chosen = getattr(request, "param", None)
    if chosen:
        monkeypatch.setenv(DIALECT_ENV, chosen)
    return os.environ.get(DIALECT_ENV, "auto")


@pytest.fixture(scope="session")
def migrated(dsn):
    store = MySQLStore(config_module.load({"dsn": dsn}, environ={}))
    store.migrate()
    store.close()
    return dsn


def _config_maker(dsn, dialect="auto"):
    """make(**overrides) -> Config for `dsn` (in `dialect`, set as the commands get
    it); keyword arguments override settings."""
    environ = {} if dialect == "auto" else {DIALECT_ENV: dialect}

    def make(**overrides):
        flags = {"dsn": dsn, **{key: str(value) if not isinstance(value, list) else ",".join(value)
                                for key, value in overrides.items()}}
        return config_module.load(flags, environ=environ)
    return make


def _store_opener(store_class, make_config):
    """Fixture body: yields open_one(**overrides) and closes every store it opened."""
    stores = []

    def open_one(**overrides):
        opened = store_class(make_config(**overrides))
        stores.append(opened)
        return opened

    yield open_one
    for opened in stores:
        opened.close()


@pytest.fixture
def make_config(migrated, dialect):
    """Config for the test database, in the test's dialect; keyword arguments
    override settings."""
    return _config_maker(migrated, dialect)


QUEUE_TABLES = ("prefork_jobs", "prefork_processes", "prefork_queue_states", "prefork_restarts",
                "prefork_minutes", "prefork_task_results", "prefork_limits", "prefork_limit_groups",
                "prefork_workflows")


@pytest.fixture
def clean_db(migrated):
    """Empty queue tables (and no test tables) before the test."""
    conn = admin_connection(database=migrated.rsplit("/", 1)[1])
    with conn.cursor() as cursor:
        for table in QUEUE_TABLES:
            cursor.execute(f"TRUNCATE {table}")
        cursor.execute("DROP TABLE IF EXISTS ledger")
        cursor.execute("CREATE TABLE ledger (idempotency_key VARCHAR(191) NOT NULL PRIMARY KEY,"
                       " job_id BIGINT NOT NULL)")
    yield conn
    conn.close()


@pytest.fixture
def store(make_config, clean_db):
    yield from _store_opener(MySQLStore, make_config)


# --- SQLite: a fresh file per test -------------------------------------------------

@pytest.fixture
def sqlite_dsn(tmp_path):
    """sqlite:////tmp/.../queue.db: tmp_path is absolute, hence the fourth slash."""
    return f"sqlite:///{tmp_path / 'queue.db'}"


@pytest.fixture
def sqlite_migrated(sqlite_dsn):
    """The SQLite file with its schema (created and migrated as `migrate` does)."""
    store = SQLiteStore(config_module.load({"dsn": sqlite_dsn}, environ={}), create=True)
    store.migrate()
    store.close()
    return sqlite_dsn


@pytest.fixture
def make_sqlite_config(sqlite_migrated):
    return _config_maker(sqlite_migrated)


@pytest.fixture
def sqlite_db(sqlite_migrated):
    """A SQLiteTestDatabase on the migrated file, with the ledger test table."""
    db = SQLiteTestDatabase(parse_dsn(sqlite_migrated))
    db.execute("CREATE TABLE ledger (idempotency_key TEXT NOT NULL PRIMARY KEY,"
               " job_id INTEGER NOT NULL)")
    yield db
    db.close()


@pytest.fixture
def sqlite_store(make_sqlite_config, sqlite_db):
    yield from _store_opener(SQLiteStore, make_sqlite_config)


# --- one suite, every backend -----------------------------------------------------------

@pytest.fixture
def backend(request):
    """One of BACKENDS: parametrized by pytest_generate_tests."""
    return request.param


@pytest.fixture
def backend_store(backend, request):
    """Like `store`, on the backend under test: opens stores on an empty queue."""
    return request.getfixturevalue("store" if backend == "mysql" else "sqlite_store")


@pytest.fixture
def queue_dsn(backend, request):
    """The DSN of the migrated queue database of the backend under test (the one `db`
    looks into), for tests that run the CLI or a client on it."""
    return request.getfixturevalue("migrated" if backend == "mysql" else "sqlite_migrated")


@pytest.fixture
def mysql_db(clean_db, migrated):
    return MySQLTestDatabase(clean_db, migrated.rsplit("/", 1)[1])


@pytest.fixture
def db(backend, request):
    """A TestDatabase on the backend under test (the same queue `backend_store` opens)."""
    return request.getfixturevalue(f"{backend}_db")


def cli_env(dsn=None, **extra):
    # Nothing of ours leaks in from the developer's environment, but the dialect
    # (see the `dialect` fixture) and the claimer (the module's docstring).
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PREFORK_QUEUE_") or key in (DIALECT_ENV, CLAIMER_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(APPS), str(ROOT)])
    if dsn:
        env["PREFORK_QUEUE_DSN"] = dsn
    env.update(extra)
    return env


def run_cli(*args, dsn=None, timeout=120, env=None, **extra_env):
    """Run `python -m prefork ARGS` to completion; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "prefork", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or cli_env(dsn, **extra_env))


def job_row(conn, job_id):
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("SELECT * FROM prefork_jobs WHERE id = %s", (job_id,))
        return cursor.fetchone()


def scalar(conn, sql, args=None):
    with conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchone()[0]


# Test access to the queue behind the store's back, the same on every backend
# (the `db` fixture): row(), scalar(), execute(), sleep(), app_connection().
# SQL is written with %s placeholders, as PyMySQL takes them; sql() adapts a
# statement for a connection of the backend, e.g. job.transaction()'s cursor.

class MySQLTestDatabase:
    backend = "mysql"

    def __init__(self, conn, database):
        self.conn = conn
        self.database = database

    def sql(self, text):
        return text

    def row(self, job_id):
        """The job's row as a dict (times as naive UTC datetimes), or None."""
        return job_row(self.conn, job_id)

    def scalar(self, sql, args=None):
        return scalar(self.conn, sql, args)

    def execute(self, sql, args=None):
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)

    def sleep(self, seconds):
        """Let `seconds` pass on the clock that leases are measured by (the server's)."""
        self.execute("DO SLEEP(%s)", (seconds,))

    def app_connection(self):
        """A connection as an application holds it: its own transaction, uncommitted."""
        return admin_connection(database=self.database, autocommit=False)


class SQLiteTestDatabase:
    backend = "sqlite"

    def __init__(self, path):
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=10)
        self.path = path

    def sql(self, text):
        return text.replace("%s", "?")

    def row(self, job_id):
        cursor = self.conn.execute("SELECT * FROM prefork_jobs WHERE id = ?", (job_id,))
        found = cursor.fetchone()
        names = [column[0] for column in cursor.description]
        return decode_times(dict(zip(names, found))) if found else None

    def scalar(self, sql, args=None):
        return self.conn.execute(self.sql(sql), args or ()).fetchone()[0]

    def execute(self, sql, args=None):
        self.conn.execute(self.sql(sql), args or ())

    def sleep(self, seconds):
        # SQLite leases are measured by this host's clock.
        time.sleep(seconds)

    def app_connection(self):
        # sqlite3's default mode opens a transaction at the first INSERT and
        # leaves the commit or rollback to the application.
        return sqlite3.connect(self.path, timeout=10)

    def close(self):
        self.conn.close()
