"""`doctor` knows the server's place in a topology: through the real CLI against
throwaway MariaDB servers (tests/throwaway_db.py) started as a one-node Galera
cluster, as a read-only server, as a primary with a binary log (with and without
semi-sync) and as its replica; then the decisions on given values, Group
Replication's among them (MySQL cannot run on this machine)."""
import json
import os

import pytest
from conftest import run_cli, wait_until
from harness import SupervisorProcess
from throwaway_db import free_port, throwaway_mariadb_factory  # noqa: F401  (pytest fixture)

from prefork.doctor.checks import Status
from prefork.doctor.clusters import (
    GroupMember,
    judge_binary_log,
    judge_galera,
    judge_galera_writers,
    judge_group_replication,
    judge_role,
)

GALERA_LIBRARY = "/usr/lib/galera/libgalera_smm.so"
DATABASE_EXIT = 3


def doctor(server, database=None, **extra_env):
    """`doctor --json` on the server: ({check: (status, detail)}, exit status)."""
    dsn = server.dsn if database is None else f"{server.dsn.rsplit('/', 1)[0]}/{database}"
    result = run_cli("doctor", "--json", dsn=dsn, **extra_env)
    assert result.returncode in (0, DATABASE_EXIT), result.stderr
    checks = {entry["check"]: (entry["status"], entry["detail"])
              for entry in json.loads(result.stdout)}
    return checks, result.returncode


def migrate(server):
    migrated = run_cli("migrate", dsn=server.dsn, timeout=60)
    assert migrated.returncode == 0, migrated.stderr


def galera_options():
    """A one-node cluster on loopback ports of its own, bootstrapped (gcomm://)."""
    return ["--wsrep-on=ON", f"--wsrep-provider={GALERA_LIBRARY}",
            "--wsrep-cluster-address=gcomm://", "--wsrep-new-cluster", "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2", "--wsrep-node-address=127.0.0.1",
            "--wsrep-node-name=node-a",
            f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{free_port()};"
            f"ist.recv_addr=127.0.0.1:{free_port()};gcache.size=16M"]


# --- real servers --------------------------------------------------------------------------

def test_a_galera_node_is_named_its_state_checked_and_its_reads_warned(
        throwaway_mariadb_factory, tmp_path):
    if not os.path.exists(GALERA_LIBRARY):
        pytest.skip("galera-4 is not installed (a skip fails under CI=true)")
    server = throwaway_mariadb_factory("galera", server_options=galera_options())
    migrate(server)
    supervisor = SupervisorProcess(tmp_path, server.dsn, "--workers", "1", "--app", "ledger_app")
    try:
        wait_until(lambda: _running_supervisors(server) == 1, timeout=30,
                   message="the supervisor in the registry")
        checks, status = doctor(server)
    finally:
        supervisor.kill()
    assert status == 0   # warnings only
    assert checks["topology"] == ("ok", "a Galera cluster node (wsrep_on): see the galera "
                                        "checks")
    assert checks["galera"] == ("ok", "node-a, Synced, in the Primary component of 1 node")
    assert checks["galera session"][0] == "ok"
    assert checks["galera session"][1].startswith("wsrep_retry_autocommit = 0 in a queue session")
    assert checks["galera writers"][0] == "ok"
    assert checks["galera writers"][1].startswith("1 live supervisor on 1 host; a one-node")
    assert "binary log" not in checks   # Galera replicates by write-sets, not by binlog
    # The mysql dialect's sessions leave the server's retry on: a claim script could
    # commit in part there, so the doctor fails it.
    checks, status = doctor(server, PREFORK_QUEUE_DIALECT="mysql")
    assert status == DATABASE_EXIT
    assert checks["galera session"][0] == "fail"
    assert checks["galera session"][1].startswith("wsrep_retry_autocommit = 1 in a queue")


def test_a_read_only_server_fails(throwaway_mariadb_factory):
    server = throwaway_mariadb_factory("readonly")
    migrate(server)   # on a read-only server migrate is refused, as every other writer is
    with server.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SET GLOBAL read_only = ON")
    refused = run_cli("status", dsn=server.dsn)
    assert refused.returncode == DATABASE_EXIT
    assert "it is read-only (read_only is ON)" in refused.stderr
    checks, status = doctor(server)
    assert status == DATABASE_EXIT
    assert checks["topology"][0] == "fail"
    assert checks["topology"][1].startswith("read_only is ON: every enqueue, claim and "
                                            "heartbeat is refused here; point the DSN at")


def test_a_binary_log_without_semi_sync_warns_and_its_replica_fails(throwaway_mariadb_factory):
    primary = throwaway_mariadb_factory("primary", server_options=[
        "--log-bin=binlog", "--server-id=1"])
    migrate(primary)
    checks, status = doctor(primary)
    assert status == 0
    assert checks["topology"] == ("ok", "a single server: no Galera, no Group Replication, "
                                        "writable")
    assert checks["binary log"][0] == "warn"
    assert checks["binary log"][1].startswith("on, replication asynchronous: after a failover")
    for wait_point, verdict in (("AFTER_COMMIT", "warn"), ("AFTER_SYNC", "ok")):
        with primary.connect() as conn, conn.cursor() as cursor:
            cursor.execute("SET GLOBAL rpl_semi_sync_master_enabled = ON")
            cursor.execute(f"SET GLOBAL rpl_semi_sync_master_wait_point = {wait_point}")
        checks, _ = doctor(primary)
        assert checks["binary log"][0] == verdict, checks["binary log"]
    assert "semi-sync AFTER_SYNC" in checks["binary log"][1]

    replica = throwaway_mariadb_factory("replica", server_options=["--server-id=2"])
    with replica.connect() as conn, conn.cursor() as cursor:
        cursor.execute("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s,"
                       " MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_USE_GTID = no",
                       (primary.port,))
        cursor.execute("START SLAVE")
    wait_until(lambda: _has_schema(replica, primary.database), timeout=60,
               message="the queue's schema replicated")
    checks, status = doctor(replica, primary.database)
    assert status == DATABASE_EXIT
    assert checks["topology"][0] == "fail"
    assert checks["topology"][1].startswith("this server is a replica (1 replication threads")


def _running_supervisors(server):
    with server.connect(server.database) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM prefork_processes WHERE state = 'running'")
        return cursor.fetchone()[0]


def _has_schema(server, database):
    with server.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.TABLES"
                       " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'prefork_schema_migrations'",
                       (database,))
        return cursor.fetchone()[0] == 1


# --- the decisions, on given values (fast) -----------------------------------------------


MEMBERS = [GroupMember("uuid-1", "db1", 3306, "ONLINE", "PRIMARY"),
           GroupMember("uuid-2", "db2", 3306, "ONLINE", "SECONDARY"),
           GroupMember("uuid-3", "db3", 3306, "RECOVERING", "SECONDARY")]


@pytest.mark.fast
@pytest.mark.parametrize("single_primary, member, status, says", [
    (True, "uuid-1", Status.OK, "single-primary, this member is the PRIMARY, 2 of 3 members "
                                "ONLINE"),
    (True, "uuid-2", Status.FAIL, "single-primary, and this member is a SECONDARY (read-only), "
                                  "2 of 3 members ONLINE: point the DSN at db1:3306"),
    (True, "uuid-3", Status.FAIL, "this member is RECOVERING, not ONLINE"),
    (True, "uuid-9", Status.FAIL, "this member is not in the group, not ONLINE"),
    (False, "uuid-2", Status.WARN, "multi-primary, 2 of 3 members ONLINE: writes through "
                                   "several members fail certification"),
])
def test_group_replication_is_judged_by_mode_state_and_role(single_primary, member, status,
                                                            says):
    check = judge_group_replication(single_primary, member, MEMBERS)
    assert check.status is status and check.detail.startswith(says), check.detail


@pytest.mark.fast
def test_a_group_member_is_judged_by_its_own_check_not_by_read_only():
    secondary = judge_role({"super_read_only": "ON", "read_only": "ON"}, 0, galera=False,
                           group=True)
    assert secondary.status is Status.OK and "group replication check" in secondary.detail
    plain = judge_role({"super_read_only": "ON", "read_only": "ON"}, 0, galera=False,
                       group=False)
    assert plain.status is Status.FAIL and plain.detail.startswith("super_read_only is ON")
    unknown = judge_role({"read_only": "OFF"}, None, galera=False, group=False)
    assert unknown.status is Status.OK and "whether it replicates could not be read" in \
        unknown.detail


@pytest.mark.fast
@pytest.mark.parametrize("status, verdict, says", [
    ({"wsrep_ready": "OFF", "wsrep_cluster_status": "non-Primary"}, Status.FAIL,
     "node-b is not ready"),
    ({"wsrep_ready": "ON", "wsrep_cluster_status": "Primary", "wsrep_cluster_size": "3",
      "wsrep_local_state_comment": "Donor/Desynced"}, Status.WARN, "node-b is Donor/Desynced"),
    ({"wsrep_ready": "ON", "wsrep_cluster_status": "Primary", "wsrep_cluster_size": "3",
      "wsrep_local_state_comment": "Synced"}, Status.OK,
     "node-b, Synced, in the Primary component of 3 nodes"),
])
def test_a_galera_node_state(status, verdict, says):
    check = judge_galera({"wsrep_node_name": "node-b", "binlog_format": "ROW"}, status)
    assert check.status is verdict and check.detail.startswith(says), check.detail


@pytest.mark.fast
def test_galera_writers_warn_on_conflicts_seen_on_this_node():
    conflicts = judge_galera_writers(3, 3, 3, cert_failures=536, bf_aborts=794)
    assert conflicts.status is Status.WARN
    assert conflicts.detail.startswith("3 live supervisors on 3 hosts; 536 certification "
                                       "failures and 794 brute-force aborts on this node")
    assert "each costs a retry" in conflicts.detail and "for speed, send every" in conflicts.detail
    quiet = judge_galera_writers(3, 3, 3, cert_failures=0, bf_aborts=0)
    assert quiet.status is Status.OK and quiet.detail.endswith("no certification conflict on "
                                                               "this node since it started")


@pytest.mark.fast
def test_mysql_semi_sync_names_are_read_too():
    source = {"log_bin": "ON", "rpl_semi_sync_source_enabled": "ON",
              "rpl_semi_sync_source_wait_point": "AFTER_SYNC"}
    assert judge_binary_log(source).status is Status.OK
    assert judge_binary_log({**source, "rpl_semi_sync_source_wait_point": "AFTER_COMMIT"}) \
        .status is Status.WARN
