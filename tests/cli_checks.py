"""How a refused command line looks from outside, checked once for every test file.

The exit codes are the README's promise ("2 for user errors, 3 for database
errors"), written here as numbers, not read from prefork.cli.exit_codes: a
change of the code's constants must fail these tests.
"""
import socket
import subprocess
import sys
from contextlib import contextmanager

from conftest import cli_env

USAGE_ERROR = 2       # bad usage or input: option, config, DSN, JSON, job type, missing schema
DATABASE_ERROR = 3    # the database cannot be reached, refuses us, or fails a statement


def assert_refused(result, *words, exit_code=USAGE_ERROR):
    """One line on stderr naming the problem (every one of `words`), the exit code,
    no traceback, nothing on stdout."""
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert result.stdout == "", result.stdout


@contextmanager
def closed_port():
    """A port on 127.0.0.1 that refuses connections while the block runs: bound by
    us, so nobody else can listen on it, and never listened on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def run_cli_in(directory, *args, dsn=None, timeout=60, **extra_env):
    """`python -m prefork ARGS` run to completion in `directory` (where a default
    SQLite file would appear)."""
    return subprocess.run([sys.executable, "-m", "prefork", *args], cwd=directory,
                          env=cli_env(dsn, **extra_env), capture_output=True, text=True,
                          timeout=timeout)
