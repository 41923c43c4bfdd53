"""Django's Tasks framework on the queue, end to end: the test project in
tests/django_project (a model, tasks, a management command that enqueues) on MariaDB
(Django's MySQL backend, PyMySQL installed as MySQLdb) and on SQLite, under Django
5.2 with the django-tasks backport and under Django 6 with django.tasks (a python3.12
venv, see django_lines.py). Every step is a real process: `manage.py migrate`,
`manage.py pq ...` (the management command enqueues and reads results), and
`prefork-queue --django proj.settings` running the tasks."""
import signal
import sqlite3
import subprocess
from datetime import datetime

import pytest
from conftest import admin_connection, cli_env, wait_until
from django_harness import PROJECT, WORKERS, line, project  # noqa: F401  (fixtures)

DRIVERS = pytest.mark.parametrize("project", ["mysql", "mysqlclient", "sqlite"], indirect=True)
HOUR = 3600   # seconds: a run_after no run of a test reaches
SOON = 2      # seconds: a run_after a test waits for


@DRIVERS
def test_commit_publishes_the_row_and_its_task_and_a_rollback_neither(project):
    rolled_back = project.pq("order", "rolled-back", "--rollback")
    missing = project.manage("pq", "result", rolled_back["id"], check=False)
    assert missing.returncode != 0 and "TaskResultDoesNotExist" in missing.stderr
    assert project.signals() == []   # task_enqueued waits for the commit
    committed = project.pq("order", "committed")
    assert project.pq("result", committed["id"])["status"] == "READY"

    sup = project.supervisor()
    result = project.wait_result(committed["id"], "SUCCESSFUL")
    orders = project.pq("orders")
    assert [order["name"] for order in orders] == ["committed"]
    worker_pid = orders[0]["marked_by"]
    assert worker_pid in [child.pid for child in sup.children()]
    assert result["return_value"] == {"order": committed["order"], "pid": worker_pid}
    assert result["attempts"] == 1 and result["errors"] == []
    assert result["task"] == "shop.tasks.mark_order" and result["args"] == [committed["order"]]
    times = [datetime.fromisoformat(result[name])
             for name in ("enqueued_at", "started_at", "finished_at")]
    assert times == sorted(times) and all(moment.utcoffset() is not None for moment in times)
    def seen():
        return [(line["signal"], line["status"]) for line in project.signals()
                if line.get("id") == committed["id"]]
    # task_finished is sent once the job reads done: its line may come a little later.
    wait_until(lambda: len(seen()) >= 3, timeout=60, message="task_finished logged")
    assert seen() == [("task_enqueued", "READY"), ("task_started", "RUNNING"),
                      ("task_finished", "SUCCESSFUL")]
    workers = {line["pid"] for line in project.signals()
               if line.get("id") == committed["id"] and line["signal"] != "task_enqueued"}
    assert workers == {worker_pid}
    # The commands read the Django project's database the same way.
    status = project.cli("status")
    assert status.returncode == 0, status.stderr
    from_environment = project.cli("show", committed["id"], flag=False)
    assert "shop.tasks.mark_order" in from_environment.stdout, from_environment.stderr
    show = project.cli("show", committed["id"])
    assert show.returncode == 0 and "shop.tasks.mark_order" in show.stdout, show.stderr


@DRIVERS
def test_failures_retry_then_read_failed_with_their_class(project):
    fails = project.enqueue("always_fails")
    recovers = project.enqueue("fails_first")
    too_big = project.enqueue("big_result", 5000)
    doubled = project.enqueue("async_double", 21)
    project.supervisor()
    failed = project.wait_result(fails, "FAILED")
    assert failed["attempts"] == 2   # OPTIONS max_attempts
    assert failed["errors"] == ["builtins.ValueError"] * 2
    assert failed["tracebacks"] == ["", ""]   # not shown: OPTIONS store_traceback False
    assert failed["finished_at"] is not None
    recovered = project.wait_result(recovers, "SUCCESSFUL")
    assert recovered["return_value"] == 2   # the context's attempt number
    assert recovered["errors"] == ["builtins.RuntimeError"] and recovered["attempts"] == 2
    refused = project.wait_result(too_big, "FAILED")
    assert refused["attempts"] == 1   # a result that cannot be stored is not retried
    assert refused["errors"] == ["prefork.contrib.django.execution.ResultRefused"]
    assert project.wait_result(doubled, "SUCCESSFUL")["return_value"] == 42
    finished = [line["status"] for line in project.signals()
                if line.get("id") == fails and line["signal"] == "task_finished"]
    assert finished == ["FAILED"]   # once: when no retry follows
    failed_list = project.cli("failed")
    assert failed_list.returncode == 0 and "return value is 5002 bytes" in failed_list.stdout


def test_the_tracebacks_the_worker_kept_are_in_the_result_when_the_options_allow_it(project):
    fails = project.enqueue("always_fails")
    project.env["PQ_TEST_TRACEBACK"] = "1"   # OPTIONS store_traceback: get_result() shows them
    project.supervisor()
    failed = project.wait_result(fails, "FAILED")
    assert len(failed["tracebacks"]) == 2
    assert all(text.startswith("Traceback (most recent call last):")
               and text.endswith("ValueError: card 4111 declined\n") for text in failed["tracebacks"])
    shown = project.cli("show", fails, "--traceback")
    assert shown.returncode == 0, shown.stderr
    kept = shown.stdout.split("\n--- attempt ")[1:]   # after the JSON, one per attempt
    assert [text.splitlines()[-1] for text in kept] == ["ValueError: card 4111 declined"] * 2


def test_run_after_delays_and_priorities_order(project):
    """Due tasks run by priority; a task runs once its run_after has come, never before.
    The one due in an hour proves the delay on any machine: with the highest priority,
    it would run first were run_after ignored, however slow the run."""
    for label, priority in (("low", -50), ("high", 80), ("middle", 0)):
        project.enqueue("record", label, priority=priority)
    far = project.pq("enqueue", "record", '"far"', f"--delay={HOUR}", "--priority=100")
    soon = project.pq("enqueue", "record", '"soon"', f"--delay={SOON}", "--priority=100")
    sup = project.supervisor("--workers", "1", "--claim-batch", "1")
    ran = project.wait_result(soon["id"], "SUCCESSFUL")
    assert ran["run_after"] == soon["run_after"]   # the task as enqueued, read back
    assert datetime.fromisoformat(ran["started_at"]) >= datetime.fromisoformat(ran["run_after"])
    wait_until(lambda: len(project.pq("traces")) == 4, timeout=60, message="4 tasks run")
    labels = [trace["label"] for trace in project.pq("traces")]
    # "soon" runs before, among or after the others, as the machine's speed has it.
    assert [label for label in labels if label != "soon"] == ["high", "middle", "low"]
    waiting = project.pq("result", far["id"])
    assert (waiting["status"], waiting["run_after"]) == ("READY", far["run_after"])
    assert ran["queue"] == "emails"   # a queue of QUEUES, worked without --queues
    assert sup.proc.poll() is None


@pytest.mark.parametrize("project", ["mysql"], indirect=True)   # counted by the server
def test_no_connection_crosses_a_fork_and_none_leaks(project):
    ids = project.enqueue("record", "job", times=40)
    sup = project.supervisor(PQ_TEST_RECORD_PARENT="1")
    wait_until(lambda: len(project.pq("traces")) == len(ids), timeout=120, message="40 tasks run")
    parent = [line["parent_connection_id"] for line in project.signals()
              if "parent_connection_id" in line]
    assert len(parent) == 1 and parent[0]
    traces = project.pq("traces")
    children = {child.pid for child in sup.children()}
    assert {trace["pid"] for trace in traces} <= children
    used = {trace["connection_id"] for trace in traces}
    assert parent[0] not in used
    by_pid = {}
    for trace in traces:
        by_pid.setdefault(trace["connection_id"], set()).add(trace["pid"])
    assert all(len(pids) == 1 for pids in by_pid.values())   # no connection shared
    conn = admin_connection()
    try:
        def open_connections():
            with conn.cursor() as cursor:
                cursor.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s",
                               (project.db_name,))
                return {row[0] for row in cursor.fetchall()}
        # The parent's store and one store per child; Django's closed after each job.
        wait_until(lambda: len(open_connections()) == WORKERS + 1, timeout=60,
                   message=f"{WORKERS + 1} server connections")
        assert parent[0] not in open_connections()
    finally:
        conn.close()


# SQLite's trigger deletes a job's results with it; on MySQL the store's prune and
# discard delete them just before the jobs.
def test_results_go_with_their_jobs(project):
    done = project.enqueue("record", "pruned")
    dead = project.enqueue("big_result", 5000)
    sup = project.supervisor()
    project.wait_result(done, "SUCCESSFUL")
    project.wait_result(dead, "FAILED")
    sup.stop()
    assert _result_rows(project) == 2
    def prune():   # once the job is a second old
        pruned = project.cli("prune", "--done-older-than", "1s")
        assert pruned.returncode == 0, pruned.stderr
        return "deleted 1 done job" in pruned.stdout
    wait_until(prune, timeout=60, interval=0.2, message="the done job pruned")
    assert _result_rows(project) == 1
    discarded = project.cli("discard", dead)
    assert discarded.returncode == 0 and "discarded 1" in discarded.stdout, discarded.stderr
    assert _result_rows(project) == 0
    for result_id in (done, dead):
        gone = project.manage("pq", "result", result_id, check=False)
        assert "TaskResultDoesNotExist" in gone.stderr


def _result_rows(project):
    if project.engine == "mysql":
        conn = admin_connection(database=project.db_name)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM prefork_task_results")
                return cursor.fetchone()[0]
        finally:
            conn.close()
    with sqlite3.connect(project.db_name) as conn:
        return conn.execute("SELECT COUNT(*) FROM prefork_task_results").fetchone()[0]


@pytest.mark.parametrize("settings, message", [
    ("nosuch.settings", "cannot set Django up with settings 'nosuch.settings': "
                        "ModuleNotFoundError"),
    ("proj.settings", "DATABASES['default'] is an in-memory SQLite database"),
])
def test_bad_django_setups_are_one_line_errors(line, tmp_path, settings, message):
    env = cli_env(PQ_TEST_DB_ENGINE="sqlite", PQ_TEST_DB_NAME=":memory:")
    done = subprocess.run([line.prefork_queue, "--workers", "1", "--django", settings],
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_projects_own_test_suite_runs_its_tasks_inline(project):
    """shop/tests.py: a result reads back as enqueued, a second alias and OPTIONS
    overridden in a test reach the worker (prefork.testing.inline's)."""
    done = project.manage("test", "shop", "--noinput", check=False)
    assert done.returncode == 0 and "Ran 3 tests" in done.stderr, done.stderr


@pytest.mark.parametrize("project", ["sqlite"], indirect=True)
def test_a_reload_keeps_the_django_database(project):
    sup = project.supervisor()
    wait_until(lambda: sup.log.events("worker_ready"), timeout=60, message="a worker ready")
    sup.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: sup.log.events("config_reloaded"), timeout=60, message="the reload")
    after = project.enqueue("record", "after the reload")
    assert project.wait_result(after, "SUCCESSFUL")["return_value"] == "after the reload"
    assert not sup.log.events("worker_boot_failed")


CHECK_OPTIONS = """
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["prefork.contrib.django"], TASKS={"default": {
    "BACKEND": "prefork.contrib.django.TaskBackend", "OPTIONS": %r}})
django.setup()
from prefork.contrib.django import compat
try:
    compat.task_backends()["default"]
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize("options, message", [
    ({"databse": "default"}, "TASKS['default']['OPTIONS'] has an unknown key 'databse'"),
    ({"max_attempts": 0}, "TASKS['default']['OPTIONS']['max_attempts'] must be an int from 1"),
    ({"store_traceback": "yes"}, "['store_traceback'] must be True or False, not 'yes'"),
])
def test_options_are_checked_when_the_backend_is_built(line, options, message):
    done = subprocess.run([line.python, "-c", CHECK_OPTIONS % (options,)], capture_output=True,
                          text=True, timeout=60, env=cli_env())
    assert done.stdout.startswith("ImproperlyConfigured "), done.stdout + done.stderr
    assert message in done.stdout, done.stdout
