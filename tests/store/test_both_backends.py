"""Handlers that run on both backends, through the real CLI.

One handler, written with PyMySQL's %s placeholders, run by `prefork-queue work
--once` on SQLite and on MariaDB, writes the same rows; and `--app myapp.tasks`
finds ./myapp in the working directory with PYTHONPATH unset (`work` and `run`),
as Celery and Gunicorn do.
"""
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from conftest import cli_env, wait_until

import prefork
from prefork.bench import processes

# The `prefork-queue` script as installed: unlike `python -m prefork`, it does not
# put the working directory on the import path by itself.
SCRIPT = str(Path(sys.executable).parent / "prefork-queue")

PORTABLE_APP = '''
import prefork

@prefork.handler("portable.greet")
def greet(job):
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO greetings (job_id, name, note)"
                       " VALUES (%s, %s, '100%% sure') -- 100%% portable",
                       (job.id, job.payload["name"]))
        cursor.executemany("INSERT INTO greetings (job_id, name, note) VALUES (%s, %s, %s)",
                           [(job.id, name, "50%") for name in job.payload["more"]])
        cursor.execute("SELECT COUNT(*) FROM greetings WHERE job_id = %s AND name LIKE %s",
                       (job.id, "%a%"))
        assert cursor.fetchone()[0] == 2, "read back through the same cursor"
'''
GREETINGS = ("CREATE TABLE greetings (job_id INTEGER NOT NULL, name VARCHAR(50) NOT NULL,"
             " note VARCHAR(50) NOT NULL)")


def run_portable_handler(db, dsn, tmp_path):
    """Enqueue one portable.greet job on `db`, run `work --once` on it; the rows written
    (the script and the app's directory on PYTHONPATH: this test needs no other fix)."""
    db.execute("DROP TABLE IF EXISTS greetings")
    db.execute(GREETINGS)
    with closing(db.app_connection()) as conn:
        job_id = prefork.enqueue(conn, "portable.greet",
                                 {"name": "ana", "more": ["mara", "o'neil"]})
        conn.commit()
    app_dir = tmp_path / db.backend
    app_dir.mkdir()
    (app_dir / "portable_app.py").write_text(PORTABLE_APP)
    result = subprocess.run([SCRIPT, "work", "--once", "--app", "portable_app"], cwd=app_dir,
                            env=cli_env(dsn, PYTHONPATH=str(app_dir)), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert db.row(job_id)["status"] == "done", result.stderr
    return sorted(_rows(db))


def _rows(db):
    with closing(db.app_connection()) as conn, closing(conn.cursor()) as cursor:
        cursor.execute("SELECT name, note FROM greetings")
        return [tuple(row) for row in cursor.fetchall()]


def test_one_handler_with_percent_s_writes_the_same_rows_on_both(mysql_db, migrated, sqlite_db,
                                                                 sqlite_migrated, tmp_path):
    on_mysql = run_portable_handler(mysql_db, migrated, tmp_path)
    on_sqlite = run_portable_handler(sqlite_db, sqlite_migrated, tmp_path)
    assert on_mysql == [("ana", "100% sure"), ("mara", "50%"), ("o'neil", "50%")]
    assert on_sqlite == on_mysql


# -- --app myapp.tasks from the working directory -----------------------------------

TASKS = '''
import os
import prefork

@prefork.handler("myapp.hello")
def hello(job):
    with open(os.path.join(os.environ["HELLO_DIR"], f"hello-{job.id}"), "w") as done:
        done.write(job.payload["who"])
'''


@pytest.fixture
def myapp_dir(tmp_path):
    """A project directory holding the package myapp (myapp/__init__.py, myapp/tasks.py)."""
    project = tmp_path / "project"
    (project / "myapp").mkdir(parents=True)
    (project / "myapp" / "__init__.py").write_text("")
    (project / "myapp" / "tasks.py").write_text(TASKS)
    return project


def env_without_pythonpath(dsn, project):
    env = cli_env(dsn, HELLO_DIR=str(project))
    del env["PYTHONPATH"]
    return env


def enqueue_hello(db, who):
    with closing(db.app_connection()) as conn:
        job_id = prefork.enqueue(conn, "myapp.hello", {"who": who})
        conn.commit()
    return job_id


def test_work_app_found_in_the_working_directory(sqlite_db, sqlite_migrated, myapp_dir):
    job_id = enqueue_hello(sqlite_db, "work")
    result = subprocess.run([SCRIPT, "work", "--once", "--app", "myapp.tasks"], cwd=myapp_dir,
                            env=env_without_pythonpath(sqlite_migrated, myapp_dir),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert (myapp_dir / f"hello-{job_id}").read_text() == "work"
    assert sqlite_db.row(job_id)["status"] == "done"


def test_run_app_found_in_the_working_directory(sqlite_db, sqlite_migrated, myapp_dir, tmp_path):
    job_id = enqueue_hello(sqlite_db, "run")
    sup = processes.SupervisorProcess(["--workers", "1", "--app", "myapp.tasks"],
                                      env_without_pythonpath(sqlite_migrated, myapp_dir),
                                      tmp_path / "sup.log", cwd=myapp_dir)
    sup.command = [SCRIPT, "run", *sup.command[4:]]
    sup.start()
    try:
        wait_until(lambda: sqlite_db.row(job_id)["status"] == "done", timeout=30,
                   message="the job done by `run`")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; log:\n{(tmp_path / 'sup.log').read_text()[-3000:]}") from None
    finally:
        sup.kill()
    assert (myapp_dir / f"hello-{job_id}").read_text() == "run"
