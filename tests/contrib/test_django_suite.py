"""Django's own Tasks tests against prefork.contrib.django: the dummy and immediate
backend suites and test_tasks of Django's tests/tasks, from the sdist of the Django the
venv runs (django_lines.py), under Django's test runner, on SQLite and on MariaDB
(PyMySQL, and mysqlclient).

The adaptation (django_suite/adaptation.patch) only selects our backend: Django's
DummyBackend and ImmediateBackend become django_suite/backends.py's, made of ours (the
immediate one runs each task at once, with prefork.testing.inline(dsn).drain()), and
the test cases may use the database our backend keeps its tasks in. Every test must
pass but those of DIFFERENT, each with the reason our backend answers otherwise. A
Django release that changes the contract changes the outcomes (or the patch no longer
applies): this test fails and names what changed.
"""
import json
import os
import shutil
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import cli_env, scratch_database
from django_lines import DJANGO6_VERSION, django6_tests, django6_venv

SUITE = Path(__file__).resolve().parent / "django_suite"
LABELS = ["tasks.test_dummy_backend", "tasks.test_immediate_backend", "tasks.test_tasks"]
TESTS = 71   # in the three modules of Django 6.0.10

DUMMY = "test_dummy_backend.DummyBackendTestCase."
IMMEDIATE = "test_immediate_backend.ImmediateBackendTestCase."
DIFFERENT = {
    DUMMY + "test_refresh_result": "the test changes the status of a result held in the "
    "dummy's memory; ours are in the database, where a copy read back changes nothing",
    DUMMY + "test_refresh_result_async": "as test_refresh_result",
    IMMEDIATE + "test_cannot_get_result": "Django's immediate backend keeps no results; "
    "ours reads them back (supports_get_result): '123' is an unknown result here",
    IMMEDIATE + "test_cannot_refresh_result": "as test_cannot_get_result: refresh() works",
    IMMEDIATE + "test_cannot_pass_run_after": "ours runs tasks later (supports_defer)",
    IMMEDIATE + "test_complex_return_value": "a return value that is not JSON fails the "
    "task with ResultRefused (not retried: running it again returns the same), not with "
    "the TypeError of Django's normalize_json",
    IMMEDIATE + "test_throws_keyboard_interrupt": "a KeyboardInterrupt that a task raises is "
    "its failure in a worker (a worker is stopped by signals to it); Django's immediate "
    "backend runs the task in the caller's process and lets it through",
    "test_immediate_backend.ImmediateBackendTransactionTestCase."
    "test_doesnt_wait_until_transaction_commit_by_default": "ours writes the job in the "
    "caller's transaction (a rollback leaves no task): no worker sees it before the commit",
}


@pytest.mark.parametrize("database", ["sqlite", "mysql", "mysqlclient"])
def test_djangos_own_tasks_tests_pass_but_the_named_differences(database, tmp_path, request):
    line = django6_venv()
    if database == "mysqlclient" and not line.mysqlclient:
        pytest.skip(f"{line.name}: mysqlclient does not import (pip install mysqlclient "
                    "needs libmariadb-dev and pkg-config)")
    folder = adapted_tests(django6_tests(line), tmp_path / "tests")
    outcomes_path = tmp_path / "outcomes.json"
    with ExitStack() as stack:
        if database == "sqlite":
            engine, name = "sqlite", str(tmp_path / "tasks.sqlite3")
        else:
            request.getfixturevalue("mysql_server")
            engine, name = "mysql", stack.enter_context(scratch_database("pq_suite"))
        env = cli_env(PQ_SUITE_DB_ENGINE=engine, PQ_SUITE_DB_NAME=name,
                      PQ_SUITE_MYSQL_DRIVER="mysqlclient" if database == "mysqlclient"
                      else "pymysql")
        run = subprocess.run([line.python, str(SUITE / "run.py"), str(folder),
                              str(outcomes_path), *LABELS],
                             env=env, capture_output=True, text=True, timeout=300)
    assert outcomes_path.exists(), f"the run wrote no outcomes:\n{run.stdout}\n{run.stderr}"
    outcomes = json.loads(outcomes_path.read_text())
    assert len(outcomes) == TESTS, f"Django {DJANGO6_VERSION}'s suites ran {len(outcomes)} tests"
    differing = {name: detail for name, (outcome, detail) in outcomes.items()
                 if outcome != "passed"}
    unexpected = {name: detail for name, detail in differing.items() if name not in DIFFERENT}
    assert not unexpected, f"not in DIFFERENT: {sorted(unexpected)}\n\n" + "\n\n".join(
        f"{name}:\n{detail}" for name, detail in unexpected.items())
    now_passing = set(DIFFERENT) - set(differing)
    assert not now_passing, f"these pass now: take them off DIFFERENT: {sorted(now_passing)}"


def adapted_tests(django_tests, into):
    """A copy of Django's tests/tasks in `into`, adaptation.patch applied; the folder
    that holds it (the tests import it as `tasks`)."""
    shutil.copytree(django_tests, into / "tasks")
    patch = subprocess.run(["git", "apply", "--verbose", str(SUITE / "adaptation.patch")],
                           cwd=into, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "GIT_CEILING_DIRECTORIES": str(into.parent)})
    assert patch.returncode == 0, (f"adaptation.patch does not apply to Django "
                                   f"{DJANGO6_VERSION}'s tests/tasks:\n{patch.stderr}")
    return into


def test_the_howto_says_what_this_suite_finds():
    path = Path(__file__).resolve().parents[2] / "docs" / "howto" / "django.md"
    howto = " ".join(path.read_text().split())
    assert f"Django {DJANGO6_VERSION}'s `tests/tasks`" in howto
    assert f"{TESTS - len(DIFFERENT)} of their {TESTS} tests" in howto
    assert f"the {len(DIFFERENT)} others" in howto
