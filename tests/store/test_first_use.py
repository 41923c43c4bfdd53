"""A forgotten DSN is not a new database: only `run` and `migrate` create one.

Every other command, and prefork.enqueue() on an application's connection to a
database without the queue schema, refuses in one line naming the database it
looked at, and leaves nothing behind.
"""
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from cli_checks import assert_refused, run_cli_in
from conftest import admin_connection, scratch_database

import prefork
from prefork.errors import NoQueueDatabase, UserError

DEFAULT_FILE = "sqlite:///prefork-queue.db"
# Every command that reads or writes jobs, as a producer or an operator types it.
COMMANDS = [["enqueue", "noop"], ["work", "--once"], ["work", "--once", "--app", "prefork.examples"],
            ["status"], ["failed"], ["show", "1"], ["retry", "--all"], ["pause", "default"], ["resume", "default"], ["restart"],
            ["prune", "--done-older-than", "7d"], ["discard", "1"]]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_without_a_dsn_a_command_refuses_and_creates_no_file(tmp_path, args):
    result = run_cli_in(tmp_path, *args)
    assert_refused(result, f"no queue database at {DEFAULT_FILE}", str(tmp_path),
                   "start the supervisor or run migrate, or set the DSN")
    assert os.listdir(tmp_path) == []


def test_a_file_without_the_queue_schema_is_refused_and_left_as_it_was(tmp_path):
    other = tmp_path / "app.db"   # the application's own database, say
    sqlite3.connect(other).close()
    result = run_cli_in(tmp_path, "enqueue", "noop", dsn=f"sqlite:///{other}")
    assert_refused(result, f"no queue database at sqlite:///{other}")
    assert sorted(os.listdir(tmp_path)) == ["app.db"] and other.stat().st_size == 0


def schema_versions():
    """The SQLite schema's versions, from the migrations the package ships (NNNN_name.sql)."""
    folder = Path(prefork.__file__).parent / "schema" / "sqlite"
    return sorted(int(path.name.split("_", 1)[0]) for path in folder.glob("*.sql"))


def test_migrate_creates_the_file_and_says_what_it_applied(tmp_path):
    first = run_cli_in(tmp_path, "migrate")
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"applied versions {', '.join(map(str, schema_versions()))}\n"
    again = run_cli_in(tmp_path, "migrate")
    assert again.returncode == 0 and again.stdout == "schema is up to date\n", again.stderr
    enqueued = run_cli_in(tmp_path, "enqueue", "noop")
    assert enqueued.returncode == 0 and enqueued.stdout.strip().isdigit(), enqueued.stderr


def test_enqueue_on_an_application_sqlite_connection_without_the_schema(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    try:
        with pytest.raises(NoQueueDatabase) as raised:
            prefork.enqueue(conn, "noop")
    finally:
        conn.close()
    assert isinstance(raised.value, UserError)
    assert str(raised.value) == (f"no queue database at sqlite:///{path}: start the "
                                 "supervisor or run migrate, or set the DSN")


def test_enqueue_on_a_pymysql_connection_without_the_schema(mysql_server):
    with scratch_database("pq_no_schema") as name, closing(admin_connection(database=name)) as app:
        with pytest.raises(NoQueueDatabase, match=f"no queue database at mysql://.*/{name}: "
                           "run migrate"):
            prefork.enqueue(app, "noop")
