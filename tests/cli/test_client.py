"""prefork.Client: enqueue without a connection of one's own.

The Client opens the configured queue database through the real store, inserts,
commits and rings; the real `prefork-queue work` then runs the job. It never
creates a database, never shares a connection with a forked child, and drops a
connection a database error may have broken.
"""
import os
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pymysql
import pytest
from conftest import admin_connection, mysql_dsn, run_cli, scratch_database, wait_until
from harness import supervisor_starter

import prefork
from prefork import client as client_module
from prefork import config as config_module
from prefork.errors import NoQueueDatabase, UserError
from prefork.store import open_store
from prefork.wakeups.doorbell import Doorbell, bell_directory


@pytest.fixture
def no_default_client():
    """No default Client before the test, and the test's one closed after it."""
    previous = client_module.set_default_client(None)
    yield
    made = client_module.set_default_client(previous)
    if made is not None:
        made.close()


def test_a_job_enqueued_by_a_client_is_run_by_the_real_worker(db, queue_dsn):
    with prefork.Client(queue_dsn, config=config_module.load(environ={})) as client:
        job_id = client.enqueue("ledger", {"n": 1}, key="client-1")
        assert client.enqueue("ledger", {"n": 1}, key="client-1") == job_id   # same key
    # Committed: another connection sees it before any worker ran.
    assert db.row(job_id)["status"] == "ready"
    result = run_cli("work", "--once", "--app", "ledger_app", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert db.row(job_id)["status"] == "done"
    assert db.scalar("SELECT job_id FROM ledger WHERE idempotency_key = %s",
                     ("client-1",)) == job_id


def test_a_client_cancels_and_commits(db, queue_dsn):
    with prefork.Client(queue_dsn, config=config_module.load(environ={})) as client:
        ready = client.enqueue("ledger", {"n": 1})
        assert client.cancel([ready, 987654321, ready]) == \
            prefork.CancelReport([ready], [], [], [987654321])
        assert client.cancel(ready) == prefork.CancelReport([], [], [ready], [])
        assert client.cancel([]) == prefork.CancelReport([], [], [], [])
        for bad in (["7"], [True], 7.0, "12"):
            with pytest.raises(UserError, match="a job id is a whole number"):
                client.cancel(bad)
    # Committed: another connection sees it.
    assert db.row(ready)["status"] == "cancelled"


def test_the_dsn_comes_from_the_configuration_and_a_given_one_wins(
        sqlite_migrated, tmp_path, monkeypatch, mysql_db, migrated):
    config_file = tmp_path / "queue.ini"
    config_file.write_text(f"[prefork-queue]\ndsn = {sqlite_migrated}\nmax_attempts = 7\n")
    monkeypatch.setenv("PREFORK_QUEUE_CONFIG", str(config_file))
    monkeypatch.delenv("PREFORK_QUEUE_DSN", raising=False)
    with prefork.Client() as from_file:
        job_id = from_file.enqueue("noop")
    with closing(sqlite3.connect(sqlite_migrated.removeprefix("sqlite:///"))) as conn:
        assert conn.execute("SELECT max_attempts FROM prefork_jobs WHERE id = ?",
                            (job_id,)).fetchone() == (7,)
    monkeypatch.setenv("PREFORK_QUEUE_DSN", migrated)   # the environment over the file
    with prefork.Client() as from_env:
        on_mysql = from_env.enqueue("noop", max_attempts=2)
    assert mysql_db.row(on_mysql)["max_attempts"] == 2
    with prefork.Client(sqlite_migrated) as given:    # the argument over both
        assert given.config.dsn == sqlite_migrated
        assert given.enqueue("noop") == job_id + 1


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path):
    path = tmp_path / "forgotten.db"
    client = prefork.Client(f"sqlite:///{path}", config=config_module.load(environ={}))
    with pytest.raises(NoQueueDatabase) as raised:
        client.enqueue("noop")
    assert str(raised.value) == (f"no queue database at sqlite:///{path}: start the "
                                 "supervisor or run migrate, or set the DSN")
    assert not path.exists()
    client.close()


def test_a_mysql_database_without_the_schema_is_refused(mysql_server):
    with scratch_database("pq_client_no_schema") as name:
        with prefork.Client(mysql_dsn(name), config=config_module.load(environ={})) as client:
            with pytest.raises(NoQueueDatabase, match=f"no queue database at "
                               f"mysql://root@.*/{name}: run migrate"):
                client.enqueue("noop")
        with closing(admin_connection()) as admin, admin.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM information_schema.tables"
                           " WHERE table_schema = %s", (name,))
            assert cursor.fetchone()[0] == 0


def test_bad_arguments_are_refused_before_any_connection(tmp_path):
    """The DSN names no database: had the Client opened it first, NoQueueDatabase
    would be the error."""
    client = prefork.Client(f"sqlite:///{tmp_path / 'none.db'}",
                            config=config_module.load(environ={}))
    with pytest.raises(UserError, match="invalid job type"):
        client.enqueue("no spaces")
    with pytest.raises(UserError, match="payload must be a JSON object"):
        client.enqueue_many("noop", [{"ok": 1}, [1, 2]])


def test_enqueue_rings_this_hosts_supervisors(sqlite_migrated):
    config = config_module.load({"dsn": sqlite_migrated}, environ={})
    with closing(open_store(config)) as queue_store:
        bell = Doorbell(queue_store.bell_key)
    try:
        with prefork.Client(config=config) as client:
            client.enqueue("noop", queue="mail")
            assert wait_until(bell.rings, message="a ring") == {"mail": 1}
            assert client.enqueue_many("noop", [{"n": n} for n in range(3)], queue="bulk") == 3
            assert wait_until(bell.rings, message="a ring") == {"bulk": 3}
    finally:
        bell.close()


def test_an_idle_supervisor_runs_the_job_at_once(tmp_path, sqlite_db, sqlite_migrated,
                                                 bell_base):
    """A poll interval of a minute: the job is run within the deadline only if the
    Client's ring woke the supervisor."""
    config = config_module.load({"dsn": sqlite_migrated}, environ={})
    with closing(open_store(config)) as queue_store:
        bell_dir = Path(bell_directory(queue_store.bell_key))
    with supervisor_starter(tmp_path, sqlite_migrated, "--app", "ledger_app") as start:
        sup = start("--workers", "1", "--poll-interval", "60",
                    env={"XDG_RUNTIME_DIR": str(bell_base)})
        sup.wait_event("worker_ready")
        wait_until((bell_dir / f"{sup.pid}.sock").exists, message="the supervisor's bell")
        with prefork.Client(config=config) as client:
            job_id = client.enqueue("noop")
            wait_until(lambda: sqlite_db.row(job_id)["status"] == "done", timeout=20,
                       message="the job done before the next poll")
        assert sup.proc.poll() is None


def _connection_id(client):
    return client._store.connection_id()


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents(mysql_db, make_config):
    client = prefork.Client(config=make_config())
    try:
        first = client.enqueue("noop", {"who": "parent"})
        parent_connection = _connection_id(client)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: report its job and connection, close politely, leave
            code = 1
            try:
                os.close(read_end)
                job_id = client.enqueue("noop", {"who": "child"})
                os.write(write_end, f"{job_id} {_connection_id(client)}".encode())
                client.close()   # a COM_QUIT on a shared socket would end the parent's session
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            child_job, child_connection = map(int, pipe.read().split())
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert child_connection != parent_connection
        # The parent's connection lived through the child's close.
        last = client.enqueue("noop", {"who": "parent again"})
        assert _connection_id(client) == parent_connection
        assert sorted([first, child_job, last]) == [first, first + 1, first + 2]
        assert mysql_db.row(child_job)["payload"] == '{"who":"child"}'
    finally:
        client.close()


def test_the_default_client_after_fork_on_sqlite(sqlite_migrated, sqlite_db, monkeypatch,
                                                 no_default_client):
    monkeypatch.setenv("PREFORK_QUEUE_DSN", sqlite_migrated)
    first = client_module.enqueue_task("noop", {"who": "parent"})
    pid = os.fork()
    if pid == 0:   # a SQLite store used outside its process raises: the child must reopen
        code = 1
        try:
            client_module.enqueue_task("noop", {"who": "child"})
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert client_module.enqueue_task("noop") == first + 2
    assert sqlite_db.row(first + 1)["payload"] == '{"who":"child"}'


def test_threads_share_a_client(mysql_db, make_config):
    ids = []
    with prefork.Client(config=make_config()) as client:
        def produce(worker):
            for n in range(20):
                ids.append(client.enqueue("noop", {"thread": worker, "n": n}))
        threads = [threading.Thread(target=produce, args=(worker,)) for worker in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert len(set(ids)) == 80
    assert mysql_db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 80


def test_a_broken_connection_is_dropped_and_the_next_call_reconnects(mysql_db, make_config):
    with prefork.Client(config=make_config()) as client:
        client.enqueue("noop")
        mysql_db.execute("KILL %s", (_connection_id(client),))
        with pytest.raises(pymysql.err.MySQLError):
            client.enqueue("noop", {"lost": True})
        job_id = client.enqueue("noop", {"after": "reconnect"})
    assert mysql_db.row(job_id)["status"] == "ready"


def test_a_connection_idle_too_long_is_replaced_before_use(mysql_db, make_config,
                                                           monkeypatch):
    """As if the server had closed it after its wait_timeout: the next enqueue works."""
    with prefork.Client(config=make_config()) as client:
        client.enqueue("noop")
        idle = _connection_id(client)
        monkeypatch.setattr(client_module, "IDLE_REOPEN_SECONDS", 0.0)
        mysql_db.execute("KILL %s", (idle,))
        job_id = client.enqueue("noop", {"after": "idle"})
        assert _connection_id(client) != idle
    assert mysql_db.row(job_id)["status"] == "ready"
