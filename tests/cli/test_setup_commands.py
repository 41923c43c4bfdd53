"""Setting-up commands as a user runs them: `grants --tables` on a real MariaDB (a
handler's job.transaction() write needs it, and works with it), and the example
config's [schedule:*] and [command:*] sections, which list every key the parsers read."""
import uuid

import pymysql
import pytest
from cli_checks import assert_refused
from conftest import SERVER, admin_connection, job_row, run_cli

from prefork import schedules
from prefork.worker import commands


def worker_dsn(database, user):
    return f"mysql://{user}@{SERVER['host']}:{SERVER['port']}/{database}"


def grant_lines(*args):
    result = run_cli("grants", "--host", "127.0.0.1", *args)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if not line.startswith("--")]


@pytest.fixture
def worker_account(mysql_server):
    """A fresh account on 127.0.0.1 with no grants; dropped after the test."""
    user, password = f"pq_g_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    admin = admin_connection()
    admin.cursor().execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
    try:
        yield admin, user, password
    finally:
        admin.cursor().execute("DROP USER IF EXISTS %s@'127.0.0.1'", (user,))
        admin.close()


def test_grants_tables_lets_the_worker_account_write_the_application_table(
        database, migrated, clean_db, worker_account):
    admin, user, password = worker_account
    queue_only = grant_lines("--user", user, "--database", database)
    with_ledger = grant_lines("--user", user, "--database", database, "--tables", "ledger")
    assert with_ledger[:len(queue_only)] == queue_only
    assert with_ledger[len(queue_only):] == [
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{database}`.`ledger` TO '{user}'@'127.0.0.1';"]
    env = {"PREFORK_QUEUE_DB_PASSWORD": password}
    dsn = worker_dsn(database, user)
    for statement in queue_only:
        admin.cursor().execute(statement)

    # Queue grants alone: the handler's INSERT into ledger is denied, so the job fails.
    denied = run_cli("enqueue", "ledger", "--key", "g-1", "--max-attempts", "1", dsn=dsn, **env)
    work = run_cli("work", "--app", "ledger_app", "--stop-when-empty", dsn=dsn, **env)
    assert work.returncode == 0, work.stderr
    assert job_row(clean_db, int(denied.stdout))["status"] == "dead"

    for statement in with_ledger[len(queue_only):]:
        admin.cursor().execute(statement)
    allowed = run_cli("enqueue", "ledger", "--key", "g-2", dsn=dsn, **env)
    work = run_cli("work", "--app", "ledger_app", "--stop-when-empty", dsn=dsn, **env)
    assert work.returncode == 0, work.stderr
    assert job_row(clean_db, int(allowed.stdout))["status"] == "done"
    with clean_db.cursor() as cursor:
        cursor.execute("SELECT job_id FROM ledger")
        assert cursor.fetchall() == ((int(allowed.stdout),),)

    as_worker = pymysql.connect(host=SERVER["host"], port=SERVER["port"], user=user,
                                password=password, database=database, autocommit=True)
    try:
        as_worker.cursor().execute("DELETE FROM ledger")   # DELETE on its own table only
        with pytest.raises(pymysql.err.MySQLError) as refused:
            as_worker.cursor().execute("DROP TABLE ledger")
        assert refused.value.args[0] == 1142
    finally:
        as_worker.close()


@pytest.mark.parametrize("tables, problem", [
    ("invoices,orders;DROP", "invalid table name 'orders;DROP'"),
    ("invoices,a.b.c", "invalid table name 'a.b.c'"),
    ("invoices,`x`", "invalid table name '`x`'"),
    ("prefork_jobs", "prefork_jobs is a queue table"),
])
def test_grants_refuses_a_bad_table_name_and_prints_nothing(tables, problem):
    result = run_cli("grants", "--database", "jobs", "--tables", tables)
    assert_refused(result, problem)


def test_grants_tables_in_another_database():
    lines = grant_lines("--database", "jobs", "--tables", "shop.orders,invoices")
    assert lines[-2:] == [
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `shop`.`orders` TO 'queue_worker'@'127.0.0.1';",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `jobs`.`invoices` TO 'queue_worker'@'127.0.0.1';"]


def test_config_example_lists_every_key_of_the_named_sections():
    result = run_cli("config", "--example")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "# [schedule:" in text and "# [command:" in text
    for key in schedules.KEYS + commands.KEYS:
        assert f"\n# {key} = " in text, key
