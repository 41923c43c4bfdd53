"""What only the SQLite store has to prove: many processes on one file, the
DSN forms, the first open, where the file lives, and the example handlers
through the CLI. The shared contract runs in test_store.py on both backends.
"""
import json
import logging
import multiprocessing
import os
import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest
from conftest import run_cli

from prefork import config as config_module
from prefork.errors import DatabaseUnavailable, NoQueueDatabase, UserError
from prefork.jobs import new_job
from prefork.logs import LOGGER
from prefork.store import open_store
from prefork.store.contract import packaged_migrations
from prefork.store.sqlite.file import filesystem_type, network_filesystem, parse_dsn
from prefork.store.sqlite.store import SQLiteStore

PROCESSES = 8
FORK = multiprocessing.get_context("fork")


def sqlite_config(dsn, **overrides):
    return config_module.load({"dsn": dsn, **{k: str(v) for k, v in overrides.items()}},
                              environ={})


@contextmanager
def warnings_logged():
    """The package's WARNING events, captured on its own logger."""
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    LOGGER.addHandler(handler)
    try:
        yield records
    finally:
        LOGGER.removeHandler(handler)


# --- processes on one file ---------------------------------------------------------

def run_in_processes(target, *args):
    """Start PROCESSES forked processes running target(start, results, *args) at once;
    returns what each put on `results`. Every process is gone when this returns."""
    start, results = FORK.Event(), FORK.Queue()
    procs = [FORK.Process(target=target, args=(start, results) + args) for _ in range(PROCESSES)]
    try:
        for proc in procs:
            proc.start()
        start.set()  # all at once: the contention is the point
        reports = [results.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(10)
        return reports
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def claim_and_complete_until_empty(start, results, dsn):
    """In a forked child: its own store; claim and complete until no job is left."""
    claimed = []
    try:
        start.wait(30)
        store = SQLiteStore(sqlite_config(dsn))
        while True:
            jobs = store.claim(["default"], f"child:{os.getpid()}", 30, limit=2)
            if not jobs:
                break
            for job in jobs:
                claimed.append(job.id)
                assert store.complete(job), f"lost the lease of job {job.id}"
        store.close()
        results.put(("ok", claimed))
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_eight_processes_claim_every_job_exactly_once(sqlite_migrated, sqlite_db):
    seeding = SQLiteStore(sqlite_config(sqlite_migrated))
    seeding.enqueue_many([new_job("noop") for _ in range(1200)])
    seeding.close()  # no connection crosses the fork
    reports = run_in_processes(claim_and_complete_until_empty, sqlite_migrated)
    errors = [detail for outcome, detail in reports if outcome == "error"]
    assert not errors
    claimed = [job_id for _, ids in reports for job_id in ids]
    assert len(claimed) == 1200 and len(set(claimed)) == 1200
    assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'") == 1200
    assert sqlite_db.scalar("SELECT MAX(attempts) FROM prefork_jobs") == 1
    assert sum(1 for _, ids in reports if ids) > 1, "the processes did not overlap"


def migrate_and_enqueue(start, results, dsn):
    try:
        start.wait(30)
        store = SQLiteStore(sqlite_config(dsn), create=True)
        store.migrate()
        store.enqueue(new_job("noop", key=f"opener-{os.getpid()}"))
        store.close()
        results.put(("ok", None))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_eight_processes_migrating_a_new_file_at_once_apply_the_schema_once(tmp_path):
    dsn = f"sqlite:///{tmp_path / 'new.db'}"
    reports = run_in_processes(migrate_and_enqueue, dsn)
    assert reports == [("ok", None)] * PROCESSES
    conn = sqlite3.connect(tmp_path / "new.db")
    try:
        versions = len(packaged_migrations("sqlite"))
        assert conn.execute("SELECT COUNT(*) FROM prefork_schema_migrations").fetchone()[0] == \
            versions
        assert conn.execute("SELECT COUNT(*) FROM prefork_jobs").fetchone()[0] == PROCESSES
    finally:
        conn.close()


def close_inherited_store(start, results, store):
    try:
        store.close()  # in a child: abandons the parent's connection, does not close it
        try:
            store.counts()
            results.put(("error", "an inherited store was usable in the child"))
        except RuntimeError:
            results.put(("ok", None))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_a_child_closing_an_inherited_store_leaves_the_parents_connection_working(sqlite_store):
    s = sqlite_store()
    s.enqueue(new_job("noop"))
    assert run_in_processes(close_inherited_store, s) == [("ok", None)] * PROCESSES
    job = s.claim(["default"], "parent:1", 30)[0]
    assert s.complete(job) and s.counts() == {"done": 1}


# --- the write lock ------------------------------------------------------------------

@contextmanager
def write_lock_held(path):
    """Another connection holding the database's write lock until the block ends."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


def test_a_claim_waits_for_a_busy_writer_instead_of_failing(sqlite_store, sqlite_db):
    s = sqlite_store()
    s.enqueue(new_job("noop"))
    with write_lock_held(sqlite_db.path) as holder:
        release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
        release.start()
        started = time.monotonic()
        jobs = s.claim(["default"], "test-host:1", 30)
        release.join()
    assert len(jobs) == 1 and time.monotonic() - started >= 0.4


def test_a_lock_held_too_long_fails_the_write_within_a_bound(sqlite_store, sqlite_db):
    s = sqlite_store(lock_wait_timeout=1)
    with write_lock_held(sqlite_db.path):
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            s.claim(["default"], "test-host:1", 30)
    # The busy timeout, then retries until the same bound: about 1 s. The upper bound
    # only tells the configured 1 s from the default 5 s, with room for a loaded machine.
    assert 0.9 <= time.monotonic() - started < 4.0


# --- DSN, first open, where the file lives --------------------------------------------------

def test_dsn_forms_relative_and_absolute():
    assert parse_dsn("sqlite:///data/queue.db") == os.path.join(os.getcwd(), "data/queue.db")
    assert parse_dsn("sqlite:////var/lib/queue.db") == "/var/lib/queue.db"
    assert parse_dsn("sqlite:////var/lib/my%20queue.db") == "/var/lib/my queue.db"
    for bad in ["sqlite://host/queue.db", "sqlite:queue.db", "sqlite:///", "sqlite:////tmp/",
                "sqlite:///:memory:", "sqlite:///queue.db?mode=ro"]:
        with pytest.raises(UserError):
            parse_dsn(bad)


def test_only_an_open_that_may_create_creates_the_file_and_migrate_applies_the_schema(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NoQueueDatabase, match="no queue database at sqlite:///first.db"):
        open_store(sqlite_config("sqlite:///first.db"))
    assert os.listdir(tmp_path) == []
    store = open_store(sqlite_config("sqlite:///first.db"), create=True)
    try:
        assert isinstance(store, SQLiteStore) and store.path == str(tmp_path / "first.db")
        versions = [version for version, _, _ in packaged_migrations("sqlite")]
        assert store.migrate() == versions   # the open created the file, not the schema
        store.check_schema()
        assert store.migrate() == []
        assert store.counts() == {}
    finally:
        store.close()
    conn = sqlite3.connect(tmp_path / "first.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


@contextmanager
def umask(mask):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def file_modes(path):
    """{suffix: permission bits} of the database file, its -wal and its -shm."""
    return {suffix: os.stat(f"{path}{suffix}").st_mode & 0o777 for suffix in ("", "-wal", "-shm")}


def test_a_new_database_file_and_its_wal_and_shm_are_private_whatever_the_umask(tmp_path):
    path = tmp_path / "private.db"
    with umask(0o022):
        store = open_store(sqlite_config(f"sqlite:///{path}"), create=True)
        try:
            store.migrate()
            store.enqueue(new_job("noop", payload={"card": "4111"}))   # the WAL holds it now
            assert file_modes(path) == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
        finally:
            store.close()
    cli_made = tmp_path / "cli.db"
    migrated = run_cli("migrate", dsn=f"sqlite:///{cli_made}")
    assert migrated.returncode == 0, migrated.stderr
    assert os.stat(cli_made).st_mode & 0o777 == 0o600


def test_an_existing_database_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared.db"
    path.touch()
    path.chmod(0o640)   # the operator's choice, e.g. a group that reads the queue
    with umask(0o022):
        store = open_store(sqlite_config(f"sqlite:///{path}"), create=True)
        try:
            store.migrate()
            store.enqueue(new_job("noop"))
            assert file_modes(path) == {"": 0o640, "-wal": 0o640, "-shm": 0o640}
        finally:
            store.close()


def test_a_missing_directory_is_named_in_one_line(tmp_path):
    with pytest.raises(DatabaseUnavailable, match="no directory"):
        open_store(sqlite_config(f"sqlite:///{tmp_path}/missing/queue.db"))


def test_filesystem_type_is_read_from_the_deepest_mount():
    mounts = ("/dev/sda1 / ext4 rw,relatime 0 0\n"
              "server:/export /mnt/share nfs4 rw,vers=4.2 0 0\n"
              "//nas/team /mnt/team\\040files cifs rw 0 0\n")
    assert filesystem_type("/mnt/share/queue.db", mounts) == "nfs4"
    assert filesystem_type("/mnt/shared/queue.db", mounts) == "ext4"  # a sibling, not inside
    assert filesystem_type("/mnt/team files/queue.db", mounts) == "cifs"
    assert filesystem_type("/home/queue.db", mounts) == "ext4"


def test_a_local_file_is_not_on_a_network_filesystem(tmp_path):
    assert network_filesystem(str(tmp_path / "queue.db")) is None


def test_a_job_held_by_another_host_warns_that_the_file_is_shared(sqlite_store):
    s = sqlite_store()
    s.enqueue(new_job("noop"))
    s.claim(["default"], "other-host.example:4242", 30)
    with warnings_logged() as records:
        sqlite_store()
    warned = [record for record in records if record.getMessage() == "sqlite_shared_by_hosts"]
    assert len(warned) == 1
    assert warned[0].prefork_fields["other_host"] == "other-host.example"


# --- the CLI and the example handlers, with no database server ------------------------------

def test_example_handlers_run_through_the_cli_on_sqlite(tmp_path):
    dsn = f"sqlite:///{tmp_path / 'queue.db'}"
    env = {"PREFORK_EXAMPLES_DIR": str(tmp_path / "reports"), "PREFORK_QUEUE_RETRY_BASE": "0.05",
           "PREFORK_QUEUE_APP": "prefork.examples"}
    assert run_cli("migrate", dsn=dsn).returncode == 0
    for job_type, payload in [("sleep", '{"seconds": 0.1}'), ("fail-n-times", '{"times": 1}'),
                              ("report", '{"title": "weekly"}')]:
        enqueued = run_cli("enqueue", job_type, payload, dsn=dsn, **env)
        assert enqueued.returncode == 0, enqueued.stderr
    report_id = int(enqueued.stdout)
    # Four runs: three jobs, and the retry of the one that failed once.
    worked = run_cli("work", "--max-jobs", "4", "--log-level", "warning", dsn=dsn, **env)
    assert worked.returncode == 0, worked.stderr
    conn = sqlite3.connect(tmp_path / "queue.db")
    try:
        rows = dict(conn.execute("SELECT job_type, status || ' ' || attempts FROM prefork_jobs"))
    finally:
        conn.close()
    assert rows == {"sleep": "done 1", "fail-n-times": "done 2", "report": "done 1"}
    report = json.loads((tmp_path / "reports" / f"report-{report_id}.json").read_text())
    assert report["job_id"] == report_id and report["title"] == "weekly"
    failed = run_cli("failed", dsn=dsn, **env)
    assert failed.returncode == 0 and len(failed.stdout.splitlines()) == 1  # the header only
