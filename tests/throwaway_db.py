"""A private MariaDB server for tests that stop, kill or restart the database.

The shared server on 127.0.0.1:3306 (conftest.mysql_server) must never be
stopped by a test. A test that needs the database to go away starts its own:

    from throwaway_db import ThrowawayMariaDB

    with ThrowawayMariaDB(tmp_path) as server:   # installed, started, database created
        server.dsn                               # mysql://root@127.0.0.1:<port>/<database>
        server.stop()                            # SIGTERM, wait: clients see the server go away
        server.start()                           # same datadir, same port: the DSN stays valid
        server.kill()                            # SIGKILL (InnoDB crash recovery at next start)
    # left: the server is killed and its directory removed, whatever happened

or, from any test module, the fixtures `throwaway_mariadb` (one server per
test) and `throwaway_mariadb_factory` (several: call it with a name):

    from throwaway_db import throwaway_mariadb  # noqa: F401  (a pytest fixture)

Everything lives in one temporary directory: the datadir, the tmpdir, the socket, the pid
file and the error log. The server reads no option file (--no-defaults), so
nothing of the system's MariaDB configuration (port 3306, /run/mysqld) is used,
and it listens on a free port on 127.0.0.1 only. It dies with the process that
started it (PR_SET_PDEATHSIG), so even a killed pytest leaves no server behind.

Timings on a 2-core machine: install about 1 s, start about 0.3 s, stop
(SIGTERM to exit) well under 0.5 s.
"""
import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql
import pytest

SHARED_PORT = 3306            # the shared test server: never ours
INSTALL_DB = "mariadb-install-db"
SERVER = "mariadbd"
PR_SET_PDEATHSIG = 1
SOCKET_PATH_MAX = 100         # sun_path is 108 bytes; keep a margin

# Small and quick: tests need a working server, not a fast one. The server
# options are also given to mariadb-install-db, which bootstraps with them.
SERVER_OPTIONS = [
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=16M",
    "--innodb-buffer-pool-dump-at-shutdown=0",
    "--innodb-buffer-pool-load-at-startup=0",
    # Commits reach the OS at once and the disk within a second: survives a
    # SIGKILL of the server (what tests do), not a power cut (what they don't).
    "--innodb-flush-log-at-trx-commit=2",
    "--skip-log-bin",
    "--skip-name-resolve",
    "--character-set-server=utf8mb4",
    "--max-connections=300",
]


def binaries_available():
    return all(shutil.which(name) for name in (INSTALL_DB, SERVER))


def free_port():
    """A TCP port nobody listens on right now (never 3306)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port != SHARED_PORT:
            return port


def _die_with_parent():
    """preexec_fn: the kernel SIGKILLs the server when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class ServerStartError(RuntimeError):
    pass


class ThrowawayMariaDB:
    """One private MariaDB server in a temporary directory; see the module docstring."""

    def __init__(self, base_dir=None, database="pq_throwaway", port=None, start_timeout=30.0,
                 server_options=()):
        if port == SHARED_PORT:
            raise ValueError("port 3306 belongs to the shared test server")
        self.base_dir = base_dir
        self.database = database
        self.port = port
        self.start_timeout = start_timeout
        # Given to mariadbd after SERVER_OPTIONS (the later of two wins): a replica's
        # server id and binary log, a Galera node's wsrep settings.
        self.server_options = list(server_options)
        self.host = "127.0.0.1"
        self.user = "root"
        self.dir = None
        self.proc = None
        self.timings = {}                 # seconds: install, start (last), stop (last)
        self._extra_dirs = []
        self._cleaned = False

    # -- life cycle ---------------------------------------------------------------

    def __enter__(self):
        try:
            self.setup()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc_info):
        self.cleanup()

    def setup(self):
        """Install a fresh datadir, start the server, create the database."""
        if not binaries_available():
            raise ServerStartError(f"{INSTALL_DB} and {SERVER} are needed on PATH")
        atexit.register(self.cleanup)
        self.dir = Path(tempfile.mkdtemp(prefix="pq-mariadb-", dir=self.base_dir))
        self.datadir = self.dir / "data"
        self.pid_file = self.dir / "mariadbd.pid"
        self.error_log = self.dir / "error.log"
        self.socket_path = self.dir / "mariadbd.sock"
        # Its own tmpdir: a starting server deletes every #sql* file in its tmpdir,
        # and in /tmp those include the live temporary tables of the shared server.
        self.tmpdir = self.dir / "tmp"
        self.tmpdir.mkdir()
        if len(str(self.socket_path)) > SOCKET_PATH_MAX:   # a deep pytest tmp_path
            short = Path(tempfile.mkdtemp(prefix="pq-sock-"))
            self._extra_dirs.append(short)
            self.socket_path = short / "mariadbd.sock"
        self._install()
        chosen = self.port
        for _ in range(3):   # the free port may be taken between probe and bind
            self.port = chosen or free_port()
            try:
                self.start()
                break
            except ServerStartError:
                if chosen or "Address already in use" not in self._error_tail():
                    raise
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        return self

    def _install(self):
        started = time.monotonic()
        command = [INSTALL_DB, "--no-defaults", f"--datadir={self.datadir}",
                   f"--tmpdir={self.tmpdir}",
                   "--auth-root-authentication-method=normal", "--skip-test-db",
                   *self._user_option(), *SERVER_OPTIONS]
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=120, cwd=self.dir)
        if result.returncode != 0:
            raise ServerStartError(f"{INSTALL_DB} failed ({result.returncode}):\n"
                                   + result.stdout[-2000:])
        self.timings["install"] = time.monotonic() - started

    @staticmethod
    def _user_option():
        # mariadbd refuses to run as root unless told so; as anyone else it runs as them.
        return ["--user=root"] if os.geteuid() == 0 else []

    def start(self):
        """Start the server on the same datadir and port; returns once it accepts clients."""
        if self.running:
            return
        started = time.monotonic()
        command = [SERVER, "--no-defaults", *self._user_option(), f"--datadir={self.datadir}",
                   f"--socket={self.socket_path}", f"--port={self.port}",
                   f"--tmpdir={self.tmpdir}",
                   f"--bind-address={self.host}", f"--pid-file={self.pid_file}",
                   f"--log-error={self.error_log}", *SERVER_OPTIONS, *self.server_options]
        with open(self.dir / "mariadbd.out", "ab") as output:
            self.proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir,
                                         preexec_fn=_die_with_parent)
        deadline = started + self.start_timeout
        while not self._accepts_clients():
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise ServerStartError(f"{SERVER} exited with {code} at start:\n"
                                       + self._error_tail())
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(f"{SERVER} did not accept connections within "
                                       f"{self.start_timeout}s:\n" + self._error_tail())
            time.sleep(0.02)
        self.timings["start"] = time.monotonic() - started

    def stop(self, timeout=30.0):
        """Shut the server down cleanly (SIGTERM) and wait until the process is gone.
        Connected clients lose their connections; new ones are refused."""
        if not self.running:
            self.proc = None
            return
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerStartError(f"{SERVER} ignored SIGTERM for {timeout}s; killed it")
        self.proc = None
        self.timings["stop"] = time.monotonic() - started

    def kill(self):
        """SIGKILL the server (a crash: the next start runs InnoDB recovery)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc = None

    def restart(self):
        self.stop()
        self.start()

    def cleanup(self):
        """Kill the server and remove every file; safe to call twice (and at exit)."""
        if self._cleaned:
            return
        self._cleaned = True
        try:
            self.kill()
        finally:
            for path in [self.dir, *self._extra_dirs]:
                if path is not None:
                    shutil.rmtree(path, ignore_errors=True)
            atexit.unregister(self.cleanup)

    # -- state and clients ----------------------------------------------------------

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid if self.running else None

    @property
    def dsn(self):
        """What prefork-queue takes: TCP, root, no password."""
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"

    def connect(self, database=None, **overrides):
        """A new autocommit PyMySQL connection (over TCP, like the code under test)."""
        args = dict(host=self.host, port=self.port, user=self.user, password="",
                    database=database, autocommit=True, connect_timeout=2)
        args.update(overrides)
        return pymysql.connect(**args)

    def _accepts_clients(self):
        try:
            self.connect(connect_timeout=1).close()
            return True
        except pymysql.err.MySQLError:
            return False

    def _error_tail(self, limit=3000):
        try:
            return self.error_log.read_text(errors="replace")[-limit:]
        except OSError:
            return "(no error log)"


# -- pytest fixtures (import them into a test module to use them) ---------------------

def _require_binaries():
    if not binaries_available():
        pytest.skip(f"{INSTALL_DB}/{SERVER} not installed (a skip fails under CI=true)")


@pytest.fixture
def throwaway_mariadb(tmp_path):
    """A private, running MariaDB server with an empty database; gone after the test."""
    _require_binaries()
    with ThrowawayMariaDB(tmp_path) as server:
        yield server


@pytest.fixture
def throwaway_mariadb_factory(tmp_path):
    """make(name="db") -> a new running ThrowawayMariaDB; all of them are removed after."""
    _require_binaries()
    servers = []

    def make(name="db", **kwargs):
        server = ThrowawayMariaDB(tmp_path, database=f"pq_{name}", **kwargs)
        servers.append(server)
        return server.setup()

    try:
        yield make
    finally:
        for server in servers:
            server.cleanup()
