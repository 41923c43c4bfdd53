"""A MariaDB primary and its async replica, on throwaway servers (tests/throwaway_db.py),
for the failover drill:

    with primary_and_replica(tmp_path) as (primary, replica):
        multi_host_dsn(primary, replica)   # mysql://root@127.0.0.1:P,127.0.0.1:R/pq_failover
        replica_caught_up(primary, replica)
        pause_replication(replica)          # the replica stops receiving (a lagging link)
        primary.kill()
        promote(replica)                    # applies what it received, then takes writes

Both write a binary log (ROW format, GTIDs); the replica runs --read-only and follows
the primary by GTID (MASTER_USE_GTID=slave_pos). The database exists on both before
replication starts, and the primary's binary log is reset after it was created there,
so the replica begins from an empty log with the same empty database.
"""
from contextlib import ExitStack, contextmanager

from conftest import wait_until
from throwaway_db import ThrowawayMariaDB

DATABASE = "pq_failover"


def replication_options(server_id, read_only=False):
    """Server options of a replication member (given after the throwaway defaults,
    which skip the binary log)."""
    return ["--log-bin=mariadb-bin", f"--server-id={server_id}", "--binlog-format=ROW",
            "--log-slave-updates", *(["--read-only"] if read_only else [])]


@contextmanager
def primary_and_replica(tmp_path):
    """(primary, replica), replicating; both killed and removed at the end."""
    with ExitStack() as stack:
        primary = stack.enter_context(ThrowawayMariaDB(
            tmp_path, database=DATABASE, server_options=replication_options(1)))
        replica = stack.enter_context(ThrowawayMariaDB(
            tmp_path, database=DATABASE, server_options=replication_options(2, read_only=True)))
        execute(primary, "RESET MASTER")
        execute(replica, f"CHANGE MASTER TO MASTER_HOST = '{primary.host}',"
                         f" MASTER_PORT = {primary.port}, MASTER_USER = 'root',"
                         " MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos,"
                         " MASTER_CONNECT_RETRY = 1")
        execute(replica, "START SLAVE")
        wait_until(lambda: replica_status(replica)["Slave_IO_Running"] == "Yes", timeout=30,
                   message="the replica to connect to its primary")
        yield primary, replica


def multi_host_dsn(*servers):
    hosts = ",".join(f"{server.host}:{server.port}" for server in servers)
    return f"mysql://root@{hosts}/{DATABASE}"


def execute(server, sql, args=None):
    with server.connect(DATABASE) as conn, conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def replica_status(replica):
    with replica.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SHOW SLAVE STATUS")
        row = cursor.fetchone()
        return dict(zip([column[0] for column in cursor.description], row)) if row else {}


def replica_caught_up(primary, replica, timeout=30):
    """Wait until the replica applied everything the primary logged so far."""
    (position,), = execute(primary, "SELECT @@gtid_binlog_pos")
    (waited,), = execute(replica, "SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout))
    assert waited == 0, f"the replica did not reach {position} within {timeout}s"


def pause_replication(replica):
    """The replica stops receiving from its primary (what it has, it still applies):
    what the primary commits from now on, the replica never sees."""
    execute(replica, "STOP SLAVE IO_THREAD")


def promote(replica, timeout=30):
    """Make the replica the primary: apply what it received, forget its primary,
    take writes (what a failover tool does)."""
    received = replica_status(replica)["Gtid_IO_Pos"]
    if received:
        (waited,), = execute(replica, "SELECT MASTER_GTID_WAIT(%s, %s)", (received, timeout))
        assert waited == 0, f"the replica did not apply {received} within {timeout}s"
    execute(replica, "STOP SLAVE")
    execute(replica, "RESET SLAVE ALL")
    execute(replica, "SET GLOBAL read_only = 0")
