"""Secrets stay secret: a password in the DSN is masked or refused without being
echoed, a password file others may read is refused, and the connection a handler
writes through cannot stack statements. Through the real CLI and real MariaDB.
"""
import os
import textwrap
import uuid

import pymysql
import pytest
from cli_checks import DATABASE_ERROR, assert_refused
from conftest import SERVER, admin_connection, cli_env, run_cli

from prefork import config
from prefork.jobs import new_job
from prefork.store.mysql import session

PASSWORD = "hunter2-Do-Not-Echo"
WORKER = "test-host:1"


def dsn_with_user(database, userinfo):
    return f"mysql://{userinfo}@{SERVER['host']}:{SERVER['port']}/{database}"


@pytest.fixture
def throwaway_account(database):
    """(user, password) of an account that exists for one test, dropped after it."""
    user, password = f"pq_s_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex}"
    admin = admin_connection()
    with admin.cursor() as cursor:
        cursor.execute("CREATE USER %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
        cursor.execute(f"GRANT SELECT ON `{database}`.* TO %s@'127.0.0.1'", (user,))
    try:
        yield user, password
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS %s@'127.0.0.1'", (user,))
        admin.close()


# --- 9: a password in the DSN ----------------------------------------------------------

@pytest.mark.parametrize("userinfo,shown", [
    (f"root:{PASSWORD}", "mysql://root:********@"),
    (f"root%3A{PASSWORD}", "mysql://********@"),        # an encoded colon
    (f"root%3a{PASSWORD}", "mysql://********@"),
])
def test_config_masks_a_password_given_in_the_dsn(database, userinfo, shown):
    result = run_cli("config", dsn=dsn_with_user(database, userinfo))
    assert result.returncode == 0, result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert f"dsn = {shown}{SERVER['host']}:{SERVER['port']}/{database}" in result.stdout


@pytest.mark.parametrize("userinfo,words", [
    (f"root:{PASSWORD}", ["bad DSN", "password"]),
    (f"root%3A{PASSWORD}", ["bad DSN", "user name", "':'"]),
    (f"root%3a{PASSWORD}", ["bad DSN", "user name", "':'"]),
    ("root%0Aevil", ["bad DSN", "control characters"]),
])
def test_a_password_in_the_dsn_is_refused_without_echoing_it(database, userinfo, words):
    for command in (["status"], ["grants"]):
        result = run_cli(*command, dsn=dsn_with_user(database, userinfo))
        assert_refused(result, *words)
        assert PASSWORD not in result.stderr


def test_an_encoded_user_name_without_a_colon_still_connects(database, migrated):
    """Percent-encoding stays allowed where a user name needs it ('@', '/', '%', space):
    here the plain name spelled with an encoded letter reaches the server as root."""
    result = run_cli("status", dsn=dsn_with_user(database, "r%6Fot"))
    assert result.returncode == 0, result.stderr


def test_a_wrong_password_is_one_line_that_does_not_echo_it(database, throwaway_account):
    user, password = throwaway_account
    dsn = dsn_with_user(database, user)
    right = run_cli("config", "--dsn", dsn, PREFORK_QUEUE_DB_PASSWORD=password)
    assert right.returncode == 0 and password not in right.stdout
    wrong_password = f"not-{password}"
    wrong = run_cli("status", dsn=dsn, PREFORK_QUEUE_DB_PASSWORD=wrong_password)
    assert_refused(wrong, "cannot connect", user, exit_code=DATABASE_ERROR)
    assert wrong_password not in wrong.stderr


def test_a_password_outside_latin1_is_one_line_without_the_value(database, throwaway_account):
    user, _ = throwaway_account
    result = run_cli("status", dsn=dsn_with_user(database, user),
                     PREFORK_QUEUE_DB_PASSWORD="pw-\u20ac-\u4e2d")
    assert_refused(result, "password", "Latin-1")
    assert "\u20ac" not in result.stderr and "\u4e2d" not in result.stderr
    assert "u20ac" not in result.stderr.lower()


# --- 11: a password file others may read ------------------------------------------------

def password_file(tmp_path, mode):
    path = tmp_path / f"db-password-{mode:o}"
    path.write_text(PASSWORD + "\n")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_password_file_its_group_or_others_may_read_is_refused(database, tmp_path, mode):
    path = password_file(tmp_path, mode)
    result = run_cli("status", "--db-password-file", str(path),
                     dsn=dsn_with_user(database, "root"))
    assert_refused(result, "db_password_file", str(path), f"{mode:04o}", "chmod 600",
                   "db_password_file_mode_check")
    assert PASSWORD not in result.stderr


def test_a_private_password_file_is_used(database, tmp_path, throwaway_account):
    user, password = throwaway_account
    path = tmp_path / "db-password"
    path.write_text(password + "\n")
    path.chmod(0o600)
    dsn = dsn_with_user(database, user)
    # status reads the queue tables: the account has SELECT, so it gets that far.
    result = run_cli("status", "--db-password-file", str(path), dsn=dsn)
    assert "db_password_file" not in result.stderr and password not in result.stderr
    assert "cannot connect" not in result.stderr, result.stderr
    assert config.load({"db_password_file": str(path)}, environ={}).password() == password


def test_the_mode_check_can_be_turned_off_for_a_shared_secret_mount(tmp_path):
    path = password_file(tmp_path, 0o444)
    checked = config.load({"db_password_file": str(path)}, environ={})
    with pytest.raises(config.UserError, match="0444"):
        checked.password()
    unchecked = config.load({"db_password_file": str(path)},
                            environ={"PREFORK_QUEUE_DB_PASSWORD_FILE_MODE_CHECK": "false"})
    assert unchecked.password() == PASSWORD


# --- 13: no stacked statements through job.transaction() ------------------------------

STACKING_APP = """
    import pymysql
    import prefork

    @prefork.handler("stacker")
    def stacker(job):
        with job.transaction() as cursor:
            try:
                cursor.execute("SELECT 1; INSERT INTO ledger VALUES ('stacked', %s)", (job.id,))
                code = 0
            except pymysql.err.ProgrammingError as exc:
                code = exc.args[0]
            cursor.execute("INSERT INTO ledger VALUES (%s, %s)", (f"{code}-{job.id}", job.id))
"""


def test_a_handler_cannot_stack_statements_and_claims_still_work(clean_db, migrated, tmp_path):
    (tmp_path / "stacking_app.py").write_text(textwrap.dedent(STACKING_APP))
    env = cli_env(migrated)
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    for number in range(6):
        enqueued = run_cli("enqueue", "stacker", "--key", f"s-{number}", env=env)
        assert enqueued.returncode == 0, enqueued.stderr
    # Claim batches of 2: after each batch's transactions, the next claim script runs.
    work = run_cli("work", "--app", "stacking_app", "--claim-batch", "2", "--stop-when-empty",
                   env=env)
    assert work.returncode == 0, work.stderr
    with clean_db.cursor() as cursor:
        cursor.execute("SELECT idempotency_key FROM ledger")
        keys = sorted(key for (key,) in cursor.fetchall())
        cursor.execute("SELECT status, COUNT(*) FROM prefork_jobs GROUP BY status")
        statuses = dict(cursor.fetchall())
    assert "stacked" not in keys
    assert len(keys) == 6 and {key.split("-")[0] for key in keys} == {"1064"}  # ER_PARSE_ERROR
    assert statuses == {"done": 6}


def test_multi_statements_are_switched_once_per_batch_of_transactions(store, monkeypatch):
    switches = []
    real_switch = session.set_multi_statements
    monkeypatch.setattr(session, "set_multi_statements",
                        lambda conn, enabled: (switches.append(enabled), real_switch(conn, enabled)))
    s = store()
    for number in range(3):
        s.enqueue(new_job("ledger", key=f"batch-{number}"))
    jobs = s.claim(["default"], WORKER, 30.0, limit=3)
    assert len(jobs) == 3 and switches == []          # a claim with no handler cursor: none
    for job in jobs:
        with job.transaction() as cursor:
            with pytest.raises(pymysql.err.ProgrammingError) as stacked:
                cursor.execute("SELECT 1; SELECT 2")
            assert stacked.value.args[0] == 1064
            cursor.execute("INSERT INTO ledger VALUES (%s, %s)", (job.idempotency_key, job.id))
    assert switches == [False]
    s.enqueue(new_job("ledger", key="after"))
    assert [job.idempotency_key for job in s.claim(["default"], WORKER, 30.0)] == ["after"]
    assert switches == [False, True]
