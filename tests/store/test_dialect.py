"""The two SQL dialects of the MySQL store on the local MariaDB (issue 13): the
server read at connect, the dialect each store, command and bench speaks, what
the mysql dialect never sends (user variables, JSON), its session setup, how a
handler's transaction is bounded in each, and the plans of its own statements.
The store, worker, supervisor and cluster suites run in both dialects too (see
conftest.DIALECT_MODULES)."""
import json
import struct

import pymysql
import pytest
from cli_checks import assert_refused
from conftest import DIALECTS, SERVER, admin_connection, run_cli, wait_until
from tcp_proxy import TcpProxy

from prefork import config as config_module
from prefork.bench.database import BenchDatabase
from prefork.bench.processes import supervisor_env
from prefork.jobs import new_job
from prefork.store.mysql import portable_queries as portable
from prefork.store.mysql.due_queries import levels
from prefork.store.mysql.queries import lease_pairs, placeholders
from prefork.store.mysql.server import Flavor
from prefork.store.mysql.store import MySQLStore, PortableMySQLStore

WORKER = "host-a:1"
both_dialects = pytest.mark.parametrize("dialect", DIALECTS, indirect=True,
                                        ids=[f"{name}_dialect" for name in DIALECTS])


@both_dialects
def test_a_store_reads_the_server_and_speaks_the_dialect_set(store, dialect):
    s = store()
    assert s.server.flavor is Flavor.MARIADB and s.server.version >= (10, 6, 0)
    assert s.dialect is Flavor(dialect)
    assert type(s) is (PortableMySQLStore if dialect == "mysql" else MySQLStore)


class VersionProxy(TcpProxy):
    """The test server behind a proxy that rewrites the version its greeting (the
    first packet of each connection) announces: to the client, a server of that
    version. Everything after the greeting passes unchanged."""

    def __init__(self, version):
        super().__init__(SERVER["host"], SERVER["port"])
        self.version = version.encode()

    def _pump(self, source, sink, pair):
        if source is pair[1]:   # the server's side of the link speaks first
            try:
                sink.sendall(self._rewritten(_packet(source)))
            except OSError:
                pass   # the link failed: the pumps below end it
        super()._pump(source, sink, pair)

    def _rewritten(self, packet):
        """Greeting: 3-byte length, sequence number, protocol version (10), the
        server version ending in NUL, then the rest, kept."""
        sequence, payload = packet[3:4], packet[4:]
        rest = payload[payload.index(0, 1):]
        payload = payload[:1] + self.version + rest
        return struct.pack("<I", len(payload))[:3] + sequence + payload


def _packet(sock):
    header = _exactly(sock, 4)
    return header + _exactly(sock, int.from_bytes(header[:3], "little"))


def _exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("the server closed the link")
        data += chunk
    return data


@pytest.mark.parametrize("version,found,minimum", [
    ("5.7.44-log", "MySQL 5.7.44", "MySQL 8.0.1"),
    ("5.5.5-10.5.23-MariaDB-log", "MariaDB 10.5.23", "MariaDB 10.6.0"),
])
def test_a_server_without_skip_locked_is_refused_in_one_line(migrated, version, found, minimum):
    database = migrated.rsplit("/", 1)[1]
    with VersionProxy(version) as proxy:
        refused = run_cli("status", dsn=f"mysql://root@127.0.0.1:{proxy.port}/{database}")
    assert_refused(refused, found, minimum, "SKIP LOCKED")


def test_auto_picks_the_mysql_dialect_for_a_server_that_says_it_is_mysql(migrated, clean_db):
    """Only the greeting says MySQL 8.4.0 (MariaDB answers): auto speaks the mysql
    dialect, which works; the mariadb dialect is refused there."""
    database = migrated.rsplit("/", 1)[1]
    with VersionProxy("8.4.0") as proxy:
        dsn = f"mysql://root@127.0.0.1:{proxy.port}/{database}"
        s = MySQLStore(config_module.load({"dsn": dsn}, environ={}))
        try:
            assert (str(s.server), s.dialect, type(s)) == ("MySQL 8.4.0", Flavor.MYSQL,
                                                            PortableMySQLStore)
            job_id = s.enqueue(new_job("noop"))
            [job] = s.claim(["default"], WORKER, 30)
            assert job.id == job_id and s.complete_many([job.lease]) == {job_id}
        finally:
            s.close()
        forced = run_cli("status", "--dialect", "mariadb", dsn=dsn)
    assert_refused(forced, "dialect = mariadb cannot run on MySQL 8.4.0")


def test_auto_speaks_the_servers_own_dialect(migrated):
    s = MySQLStore(config_module.load({"dsn": migrated}, environ={}))
    try:
        assert (s.dialect, type(s)) == (Flavor.MARIADB, MySQLStore)
    finally:
        s.close()


@both_dialects
def test_only_the_mariadb_dialect_passes_ids_in_user_variables(store, dialect):
    s = store()
    for i in range(6):
        s.enqueue(new_job("noop", key=f"k{i}"))
    first = s.claim(["default"], WORKER, 30, limit=2)
    done, second = s.complete_and_claim([job.lease for job in first], ["default"], WORKER, 30,
                                        limit=2)
    assert done == {job.id for job in first} and len(second) == 2
    assert s.complete_many([job.lease for job in second]) == {job.id for job in second}
    claimed, completed = s._one("SELECT @prefork_claimed, @prefork_completed")
    if dialect == "mysql":
        assert (claimed, completed) == (None, None)
    else:
        assert json.loads(completed) == sorted(job.id for job in second)


@both_dialects
def test_the_session_is_set_up_for_its_dialect(store, dialect):
    s = store(lease_seconds=7.5)
    sql_mode, isolation, idle = s._one("SELECT @@SESSION.sql_mode, @@SESSION.tx_isolation,"
                                       " @@SESSION.idle_transaction_timeout")
    assert isolation == "READ-COMMITTED"
    if dialect == "mysql":   # MySQL 8's default mode; nothing MariaDB-only
        assert set(sql_mode.split(",")) == {
            "ONLY_FULL_GROUP_BY", "STRICT_TRANS_TABLES", "NO_ZERO_IN_DATE", "NO_ZERO_DATE",
            "ERROR_FOR_DIVISION_BY_ZERO", "NO_ENGINE_SUBSTITUTION"}
        assert idle == 0
    else:
        assert idle == 8


@both_dialects
def test_a_handlers_transaction_left_idle_is_ended_and_its_row_freed(store, dialect):
    """A host that vanishes inside job.transaction() leaves its job's row locked
    only for about a lease (here one second): then the server ends the session
    and the row can be taken again. MariaDB's idle_transaction_timeout does it in
    the mariadb dialect, a wait_timeout bound for that span in the mysql dialect."""
    s = store(lease_seconds=1)
    job_id = s.enqueue(new_job("noop"))
    [job] = s.claim(["default"], WORKER, 1)
    other = admin_connection(database=s.dsn_args["database"], autocommit=False)
    try:
        with pytest.raises(pymysql.err.Error):   # the session is gone
            with s.completing(job):
                wait_until(lambda: _lockable(other, job_id), timeout=10,
                           message="the idle transaction to be ended")
    finally:
        other.close()


def _lockable(conn, job_id):
    """Whether the row can be locked now (without waiting); leaves it unlocked."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT id FROM prefork_jobs WHERE id = %s FOR UPDATE SKIP LOCKED",
                       (job_id,))
        found = cursor.fetchone() is not None
    conn.rollback()
    return found


@both_dialects
def test_the_mysql_dialect_bounds_silence_only_while_a_handlers_transaction_lasts(store, dialect):
    s = store(lease_seconds=30)
    s.enqueue(new_job("noop"))
    [job] = s.claim(["default"], WORKER, 30)
    server_setting = s._one("SELECT @@GLOBAL.wait_timeout")[0]
    with s.completing(job) as cursor:
        cursor.execute("SELECT @@SESSION.wait_timeout")
        during = cursor.fetchone()[0]
    assert during == (30 if dialect == "mysql" else server_setting)
    assert s._one("SELECT @@SESSION.wait_timeout")[0] == server_setting


@both_dialects
def test_a_command_speaks_the_dialect_of_its_environment(store, migrated, dialect, tmp_path):
    """`work` in a subprocess, the dialect set only in its environment (as
    conftest.cli_env passes it): its handler sees the session of that dialect."""
    out = tmp_path / "session.json"
    store().enqueue(new_job("session_settings", {"out": str(out)}))
    worked = run_cli("work", "--app", "dialect_app", "--once", "--lease-seconds", "9",
                     dsn=migrated)
    assert worked.returncode == 0, worked.stderr
    seen = json.loads(out.read_text())
    assert seen["isolation"] == "READ-COMMITTED"
    if dialect == "mysql":
        assert "ONLY_FULL_GROUP_BY" in seen["sql_mode"]
        assert (seen["wait_timeout"], seen["idle_transaction_timeout"]) == (9, 0)
        assert seen["prefork_claimed"] is None
    else:
        assert "ONLY_FULL_GROUP_BY" not in seen["sql_mode"]
        assert seen["wait_timeout"] == seen["global_wait_timeout"]
        assert seen["idle_transaction_timeout"] == 9
        assert seen["prefork_claimed"] is not None


@pytest.mark.parametrize("dialect", ["mysql"], indirect=True, ids=["mysql_dialect"])
def test_the_bench_and_its_supervisor_get_the_dialect(make_config, clean_db, dialect):
    config = make_config()
    bench = BenchDatabase(config)
    try:
        assert type(bench.store) is PortableMySQLStore and bench.is_mysql
    finally:
        bench.store.close()
    assert supervisor_env(config, {})["PREFORK_QUEUE_DIALECT"] == "mysql"


def test_an_unknown_dialect_is_refused_in_one_line(migrated):
    assert_refused(run_cli("status", "--dialect", "oracle", dsn=migrated), "--dialect",
                   "auto, mariadb, mysql")


def fill_for_plans(s):
    """Enough rows in every state that a bad plan would show (as test_store does)."""
    s.enqueue_many([new_job("noop", queue=f"q{i % 7}", priority=i % 3) for i in range(3000)])
    s.claim([f"q{i}" for i in range(7)], WORKER, 30, limit=50)


@pytest.mark.parametrize("dialect", ["mysql"], indirect=True, ids=["mysql_dialect"])
def test_the_mysql_dialects_statements_read_an_index_range(store, clean_db, dialect):
    """Its locking read takes the next jobs from the claim index in order (no
    filesort: it locks only the rows it returns); the rest go by primary key
    (the read-back sorts the few rows it found)."""
    s = store()
    fill_for_plans(s)
    s.set_paused("q2", True)   # the paused-queue check has a row to look at
    clean_db.cursor().execute("ANALYZE TABLE prefork_jobs")
    pairs, ids = lease_pairs(2), placeholders(2)
    statements = [
        (portable.LOCK_NEXT_READY_IDS.format(levels=levels(3)), ("q1", 0, 1, 2, "q1", 10),
         "ix_prefork_jobs_claim"),
        (portable.RESERVE_IDS.format(ids=ids), ("s", 1, WORKER, None, 5, 9), "PRIMARY"),
        (portable.READ_BACK_IDS.format(ids=ids), (5, 9, "s"), "PRIMARY"),
        (portable.COMPLETE_LEASED.format(lease_pairs=pairs), (5, "a" * 32, 9, "b" * 32),
         "PRIMARY"),
        (portable.DONE_UNDER_LEASES.format(lease_pairs=pairs), (5, "a" * 32, 9, "b" * 32),
         "PRIMARY"),
    ]
    for statement, args, index in statements:
        with clean_db.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute("EXPLAIN " + statement, args)
            plan = cursor.fetchall()
        [row] = [row for row in plan if row["table"] == "prefork_jobs"]
        assert row["key"] == index and row["type"] in ("range", "ref", "const"), (statement, plan)
        if index != "PRIMARY":
            assert "filesort" not in (row["Extra"] or ""), (statement, plan)
