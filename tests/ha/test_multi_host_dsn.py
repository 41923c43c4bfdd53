"""A DSN naming several hosts (mysql://root@a:1,b:2/db): the first that takes the
connection and may be written to is used, a read-only one (a replica) is passed over
with one line naming it, and the loss of a host moves supervisors and producers to
the next. Each test starts its own throwaway MariaDB servers (tests/throwaway_db.py),
independent of each other (no replication: what lands where shows who wrote it)."""
import json
import time
from contextlib import ExitStack

import pymysql
import pytest
from conftest import run_cli, wait_until
from harness import SupervisorProcess
from throwaway_db import ThrowawayMariaDB, binaries_available

import prefork
from prefork import config as config_module

DATABASE = "pq_multi"
WORKERS = 2

pytestmark = pytest.mark.skipif(not binaries_available(),
                                reason="mariadb-install-db/mariadbd not installed")


@pytest.fixture
def servers(tmp_path):
    """make(*server_options) -> a new running, migrated ThrowawayMariaDB on DATABASE."""
    with ExitStack() as stack:
        def make(*server_options):
            server = stack.enter_context(ThrowawayMariaDB(tmp_path, database=DATABASE))
            migrated = run_cli("migrate", dsn=server.dsn, timeout=60)
            assert migrated.returncode == 0, migrated.stderr
            if server_options:   # e.g. --read-only: after the migration, which writes
                server.server_options += list(server_options)
                server.restart()
            return server
        yield make


def dsn_of(*servers):
    return f"mysql://root@{','.join(f'{s.host}:{s.port}' for s in servers)}/{DATABASE}"


def job_ids(server, status=None):
    with server.connect(DATABASE) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT id FROM prefork_jobs WHERE %s IS NULL OR status = %s",
                       (status, status))
        return {row[0] for row in cursor.fetchall()}


def log_lines(stderr, name):
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == name]


def enqueue(dsn, *args):
    return run_cli("enqueue", "--log-format", "json", "noop", "{}", *args, dsn=dsn, timeout=60)


def test_a_read_only_server_is_passed_over_with_one_line_naming_it(servers):
    replica, primary = servers("--read-only"), servers()
    enqueued = enqueue(dsn_of(replica, primary))
    assert enqueued.returncode == 0, enqueued.stderr
    job_id = int(enqueued.stdout.split()[-1])
    # root may write to a read-only MariaDB (SUPER): only our check kept it off the replica.
    assert job_ids(primary) == {job_id} and job_ids(replica) == set()
    [skipped] = log_lines(enqueued.stderr, "database_host_skipped")
    assert skipped["host"] == f"{replica.host}:{replica.port}"
    assert "read-only" in skipped["reason"]


def test_only_read_only_servers_is_a_one_line_error_naming_each(servers):
    first, second = servers("--read-only"), servers("--read-only")
    refused = enqueue(dsn_of(first, second))
    assert refused.returncode != 0
    [line] = [line for line in refused.stderr.splitlines() if not line.startswith("{")]
    for server in (first, second):
        assert f"{server.host}:{server.port}: it is read-only" in line
    assert job_ids(first) == job_ids(second) == set()


@pytest.mark.parametrize("hosts, expected", [
    ("127.0.0.1:3306,,127.0.0.1:3307", "a host is empty"),
    ("127.0.0.1:3306,", "a host is empty"),
    ("127.0.0.1:3306,127.0.0.1:port", "the port of 127.0.0.1 must be a number"),
    ("127.0.0.1:3306,127.0.0.1:99999", "the port of 127.0.0.1 must be a number"),
    ("127.0.0.1,[::1", "IPv6"),
])
def test_a_bad_host_list_is_a_one_line_error(hosts, expected):
    refused = run_cli("enqueue", "noop", "{}", dsn=f"mysql://root@{hosts}/{DATABASE}")
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "bad DSN" in refused.stderr and expected in refused.stderr


def test_the_supervisor_works_again_on_the_next_host_when_the_first_is_killed(servers,
                                                                              tmp_path):
    first, second = servers(), servers()
    dsn = dsn_of(first, second)
    sup = SupervisorProcess(tmp_path, dsn, "--app", "ledger_app", "--workers", str(WORKERS),
                            "--poll-interval", "0.2",
                            "--heartbeat-interval", "1")
    try:
        sup.wait_event("supervisor_started", timeout=30)
        assert enqueue(dsn).returncode == 0
        wait_until(lambda: job_ids(first, "done"), timeout=30, message="a job done on the first")
        first.kill()
        killed_at = time.monotonic()
        # A producer on the same DSN goes to the second host at once.
        enqueued = enqueue(dsn)
        assert enqueued.returncode == 0, enqueued.stderr
        moved = int(enqueued.stdout.split()[-1])
        assert job_ids(second) == {moved}
        wait_until(lambda: moved in job_ids(second, "done"), timeout=60,
                   message="the job enqueued on the second host done there")
        print(f"first host killed -> a job done on the second: "
              f"{time.monotonic() - killed_at:.1f}s")
        assert sup.proc.poll() is None
        sup.wait_event("supervisor_registered", count=2, timeout=30)   # joined on the second
    finally:
        sup.kill_all()


def test_a_client_goes_to_the_next_host_once_its_host_is_lost(servers):
    first, second = servers(), servers()
    config = config_module.load({"dsn": dsn_of(first, second)}, environ={})
    with prefork.Client(config=config) as client:
        on_first = client.enqueue("noop")
        assert job_ids(first) == {on_first}
        first.kill()
        with pytest.raises(pymysql.err.OperationalError):   # the statement in flight is lost
            client.enqueue("noop")
        on_second = client.enqueue("noop")   # the next call connects to the next host
    assert job_ids(second) == {on_second}
