"""A 3-node MariaDB Galera cluster on loopback, for tests that need writers on
several nodes (built on throwaway_db.ThrowawayMariaDB, one server per node).

    from galera_cluster import GaleraCluster

    with GaleraCluster(size=3) as cluster:   # bootstrapped, joined, all Synced
        cluster.dsn(0), cluster.dsn(1)       # one DSN per node, same database
        cluster.kill(1)                      # SIGKILL node 1: the others go on
        cluster.restart(1)                   # it rejoins (IST from a donor) ...
        cluster.wait_synced(1)               # ... and is Synced and ready again

or the module-scoped fixture `galera_cluster` (import it into a test module).

Each node has its own datadir, tmpdir, socket, client port, group
communication port (gmcast.listen_addr), IST port (ist.recv_addr) and SST port,
all on 127.0.0.1. The first node bootstraps the cluster (--wsrep-new-cluster);
the others join it and receive its data by rsync SST. A node killed and
restarted joins the ones still running and catches up by IST.

When the tests run as root, the nodes run as the `mysql` user (datadir and
directories owned by mysql, --user=mysql), as a packaged server does; their
directories are made in /tmp (a pytest tmp_path is closed to other users).
A node that changed user no longer dies with the test process
(PR_SET_PDEATHSIG is cleared by setuid): cleanup() and atexit kill them.

Timings on a 2-core machine: start (install, bootstrap, two SSTs) about 13 s;
a killed node is evicted in about 4 s; restart (recovery, IST) about 5 s.
"""
import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path

import pymysql
import pytest

from throwaway_db import (SERVER, SERVER_OPTIONS, ServerStartError, ThrowawayMariaDB,
                          binaries_available, free_port)

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
RUN_AS = "mysql"
DATABASE = "pq_galera"
SYNC_TIMEOUT = 60.0
# Failure detection: a killed node is evicted in a few seconds (defaults: 5 s
# suspect, 15 s inactive), with room for a loaded CI machine.
EVS = "evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S"


def galera_available():
    return binaries_available() and Path(PROVIDER).exists() and bool(shutil.which("rsync"))


class GaleraNode(ThrowawayMariaDB):
    """One node: a throwaway server with wsrep on, owned by the mysql user when root."""

    def _user_option(self):
        return [f"--user={RUN_AS}"] if os.geteuid() == 0 else []

    def _install(self):
        # Before mariadb-install-db: the server (run as mysql) writes its
        # log, pid file, socket and tmpdir here.
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            for path in [self.dir, *self._extra_dirs, self.tmpdir, self.socket_path.parent]:
                os.chown(path, entry.pw_uid, entry.pw_gid)
        super()._install()

    def recover_position(self):
        """After a crash, grastate.dat says seqno -1 and a plain start would take a
        full SST: read the last committed position from InnoDB (what the packaged
        galera_recovery does) and start from it, so the node asks for IST."""
        log = self.dir / "recover.log"
        log.unlink(missing_ok=True)
        subprocess.run([SERVER, "--no-defaults", *self._user_option(),
                        f"--datadir={self.datadir}", f"--tmpdir={self.tmpdir}",
                        f"--socket={self.socket_path}", f"--pid-file={self.pid_file}",
                        f"--log-error={log}", *SERVER_OPTIONS, *self.server_options,
                        "--skip-networking", "--wsrep-recover"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, cwd=self.dir)
        found = re.search(r"WSREP: Recovered position: (\S+:-?\d+)", log.read_text())
        self.server_options = [option for option in self.server_options
                               if not option.startswith("--wsrep-start-position=")]
        if found:
            self.server_options.append(f"--wsrep-start-position={found.group(1)}")

    def status(self, *names):
        """{name: value} of SHOW GLOBAL STATUS for these wsrep variables."""
        with self.connect(connect_timeout=1, read_timeout=5) as conn, conn.cursor() as cursor:
            cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN %s", (names,))
            return dict(cursor.fetchall())

    def synced(self):
        try:
            state = self.status("wsrep_local_state_comment", "wsrep_ready")
        except pymysql.err.MySQLError:
            return False
        return state.get("wsrep_local_state_comment") == "Synced" \
            and state.get("wsrep_ready") == "ON"


class GaleraCluster:
    """size nodes on loopback; see the module docstring."""

    def __init__(self, size=3, database=DATABASE):
        self.size = size
        self.database = database
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        self.gcomm_ports = [gcomm for gcomm, _, _ in ports]
        address = "gcomm://" + ",".join(f"127.0.0.1:{port}" for port in self.gcomm_ports)
        self.nodes = [GaleraNode(database=database, start_timeout=SYNC_TIMEOUT,
                                 server_options=self._options(index, address, *ports[index]))
                      for index in range(size)]
        self.timings = {}

    @staticmethod
    def _options(index, address, gcomm, ist, sst):
        return [
            f"--wsrep-provider={PROVIDER}", "--wsrep-on=ON",
            f"--wsrep-cluster-address={address}", "--wsrep-cluster-name=pq_test",
            f"--wsrep-node-name=node{index}", "--wsrep-node-address=127.0.0.1",
            f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm};"
            f"ist.recv_addr=127.0.0.1:{ist};gcache.size=64M;{EVS}",
            "--wsrep-sst-method=rsync", f"--wsrep-sst-receive-address=127.0.0.1:{sst}",
            "--wsrep-slave-threads=2",
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
            "--default-storage-engine=InnoDB",
        ]

    # -- life cycle -----------------------------------------------------------------

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc_info):
        self.cleanup()

    def start(self):
        """Bootstrap node 0, create the database, join the others one by one."""
        started = time.monotonic()
        first = self.nodes[0]
        first.server_options.append("--wsrep-new-cluster")
        first.setup()                      # creates the database, replicated to joiners
        first.server_options.remove("--wsrep-new-cluster")   # a restart joins the others
        self.wait_synced(0)
        for index in range(1, self.size):   # at once is no faster: a donor serves one
            self.nodes[index].setup()
            self.wait_synced(index)
        self.timings["start"] = time.monotonic() - started
        return self

    def kill(self, index):
        """SIGKILL one node (a crash): the others evict it and go on."""
        self.nodes[index].kill()

    def restart(self, index):
        """Start a stopped or killed node again: it joins the running ones (IST)."""
        started = time.monotonic()
        self.nodes[index].recover_position()
        self.nodes[index].start()
        self.wait_synced(index)
        self.timings["restart"] = time.monotonic() - started

    def wait_synced(self, index, timeout=SYNC_TIMEOUT):
        node = self.nodes[index]
        deadline = time.monotonic() + timeout
        while not node.synced():
            if not node.running:
                raise ServerStartError(f"galera node {index} exited:\n" + node._error_tail())
            if time.monotonic() > deadline:
                raise ServerStartError(f"galera node {index} not Synced within {timeout}s:\n"
                                       + node._error_tail())
            time.sleep(0.1)

    def cluster_size(self, index=0):
        return int(self.nodes[index].status("wsrep_cluster_size")["wsrep_cluster_size"])

    def cleanup(self):
        """Kill every node and remove its files; safe to call twice."""
        for node in self.nodes:
            node.cleanup()

    # -- clients --------------------------------------------------------------------

    def dsn(self, index):
        return self.nodes[index].dsn

    def connect(self, index, **overrides):
        return self.nodes[index].connect(database=self.database, **overrides)


@pytest.fixture(scope="module")
def galera_cluster():
    """A running 3-node cluster for the whole module; killed and removed after it."""
    if not galera_available():
        pytest.skip(f"galera-4 ({PROVIDER}) and rsync are needed (a skip fails under CI=true)")
    with GaleraCluster() as cluster:
        yield cluster
