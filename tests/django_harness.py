"""The Django test project (tests/django_project) on a fresh database, driven by
real processes of one of the interpreters in django_lines.py: the `line` and
`project` fixtures the Django tests share."""
import json
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import cli_env, scratch_database, wait_until
from django_lines import django6_venv, this_python
from harness import EventLog

from prefork.bench import processes

PROJECT = Path(__file__).resolve().parent / "django_project"
SETTINGS = "proj.settings"
WORKERS = 2


@pytest.fixture(scope="module", params=["django5.2", "django6"])
def line(request):
    return this_python() if request.param == "django5.2" else django6_venv()


@pytest.fixture(params=["mysql", "sqlite"])
def project(request, line, tmp_path):
    """The project on a fresh database: "mysql" through PyMySQL installed as MySQLdb,
    "mysqlclient" through Django's own driver, "sqlite" in a file."""
    if request.param == "mysqlclient" and not line.mysqlclient:
        pytest.skip(f"{line.name}: mysqlclient does not import (pip install mysqlclient "
                    "needs libmariadb-dev and pkg-config)")
    engine = "sqlite" if request.param == "sqlite" else "mysql"
    with ExitStack() as database:   # a MySQL database is dropped after the processes end
        if engine == "mysql":
            request.getfixturevalue("mysql_server")
            name = database.enter_context(scratch_database("pq_dj"))
        else:
            name = str(tmp_path / "project.sqlite3")
        made = Project(line, engine, name, tmp_path, driver=request.param)
        try:
            made.manage("migrate", "--no-input")
            yield made
        finally:
            made.kill_all()


class DjangoSupervisor(processes.SupervisorProcess):
    """`prefork-queue run --django proj.settings ARGS` of the project's interpreter."""

    def __init__(self, project, args, env, log_path):
        super().__init__([], env, log_path, label="the Django supervisor", cwd=PROJECT)
        self.command = [project.line.prefork_queue, "run", "--log-format", "json",
                        "--django", SETTINGS, *args]
        self.log = EventLog(log_path)
        self.start()


class Project:
    """The test project on one database, driven by its interpreter's processes."""

    def __init__(self, line, engine, db_name, tmp_path, driver):
        self.line, self.engine, self.db_name, self.tmp = line, engine, db_name, tmp_path
        self.log_path = tmp_path / "signals.jsonl"
        self.env = cli_env(PQ_TEST_DB_ENGINE=engine, PQ_TEST_DB_NAME=db_name,
                           PQ_TEST_MYSQL_DRIVER="mysqlclient" if driver == "mysqlclient"
                           else "pymysql",
                           PQ_TEST_LOG=str(self.log_path), PREFORK_QUEUE_RETRY_BASE="0.05")
        self.supervisors = []

    def manage(self, *args, check=True):
        done = subprocess.run([self.line.python, "manage.py", *args], cwd=PROJECT, env=self.env,
                              capture_output=True, text=True, timeout=120)
        if check and done.returncode:
            raise AssertionError(f"manage.py {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def pq(self, *args):
        return json.loads(self.manage("pq", *args).stdout)

    def enqueue(self, task, *values, **options):
        """The id of the task enqueued (with times=N: the list of N ids, one process)."""
        flags = [f"--{name}={value}" for name, value in options.items()]
        enqueued = self.pq("enqueue", task, *map(json.dumps, values), *flags)
        return enqueued["ids"] if "times" in options else enqueued["id"]

    def wait_result(self, result_id, status, timeout=60):
        def reached():
            found = self.pq("result", result_id)
            return found if found["status"] == status else None
        return wait_until(reached, timeout=timeout, interval=0.2,
                          message=f"task {result_id} {status}")

    def cli(self, *args, flag=True):
        """`prefork-queue ARGS --django proj.settings` (flag=False: DJANGO_SETTINGS_MODULE)."""
        command = [self.line.prefork_queue, *args] + (["--django", SETTINGS] if flag else [])
        env = self.env if flag else {**self.env, "DJANGO_SETTINGS_MODULE": SETTINGS}
        return subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True,
                              timeout=60)

    def supervisor(self, *args, **env):
        log_path = self.tmp / f"sup{len(self.supervisors)}.log"
        sup = DjangoSupervisor(self, ["--workers", str(WORKERS), *args],
                               {**self.env, **env}, log_path)
        self.supervisors.append(sup)
        return sup

    def signals(self):
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def kill_all(self):
        for sup in self.supervisors:
            sup.kill()

