"""A hung host in a multi-host DSN (its server stopped with SIGSTOP: the kernel still
takes the TCP connection, the server never sends its greeting) costs a connection
connect_timeout, not read_timeout, before the next host is tried. Throwaway MariaDB
servers (tests/throwaway_db.py), as in test_multi_host_dsn.py."""
import signal
import time

import pytest
from conftest import run_cli
from test_multi_host_dsn import dsn_of, job_ids, servers  # noqa: F401  (servers: a fixture)
from throwaway_db import binaries_available

CONNECT_TIMEOUT, READ_TIMEOUT = 2, 30

pytestmark = pytest.mark.skipif(not binaries_available(),
                                reason="mariadb-install-db/mariadbd not installed")


def test_a_hung_first_host_costs_connect_timeout_then_the_next_is_used(servers):  # noqa: F811
    hung, second = servers(), servers()
    hung.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        enqueued = run_cli("enqueue", "--log-format", "json",
                           "--connect-timeout", str(CONNECT_TIMEOUT),
                           "--read-timeout", str(READ_TIMEOUT), "noop", "{}",
                           dsn=dsn_of(hung, second), timeout=2 * READ_TIMEOUT)
        took = time.monotonic() - started
    finally:
        hung.proc.send_signal(signal.SIGCONT)
    assert enqueued.returncode == 0, enqueued.stderr
    assert job_ids(second) == {int(enqueued.stdout.split()[-1])}
    # Waiting for the greeting with read_timeout would take READ_TIMEOUT at least.
    print(f"a hung first host, then a job enqueued on the second: {took:.1f}s")
    assert took < READ_TIMEOUT, enqueued.stderr
    assert "timed out" in enqueued.stderr
