"""The release as a user gets it: the sdist and wheel that `python -m build` makes from
this checkout, checked by `twine check --strict`, and the wheel installed alone (with
its install_requires, from the package index) into a fresh virtualenv, where the Quick
start's SQLite part and `doctor` run from an empty directory outside the checkout.
CI installs the checkout in editable mode: only this test sees a wheel that lacks a file."""
import configparser
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from contextlib import suppress
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, wait_until
from harness import titles

BUILD_TIMEOUT = 600            # seconds; fetching setuptools and the dependencies included
COMMAND_TIMEOUT = 120
IGNORED_PACKAGE = "absent from the `packages` configuration"   # setuptools' "would be ignored"


def declared_version():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg["metadata"]["version"]


def checkout_files(*paths):
    """The checkout's files (tracked, or new and not ignored), relative to ROOT."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                             "--", *paths], cwd=ROOT, capture_output=True, check=True, timeout=60)
    return [name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).exists()]


def run(*args, timeout=COMMAND_TIMEOUT, **kwargs):
    """Run a command to its end; it must exit 0."""
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """(build output, sdist, wheel), built from a copy of the checkout's files, so that the
    build's own files (egg-info) never land in the checkout other tests import from."""
    source, dist = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name, follow_symlinks=False)
    built = run(sys.executable, "-m", "build", "--outdir", str(dist), str(source), timeout=BUILD_TIMEOUT)
    stem = f"prefork_queue-{declared_version()}"
    return built.stdout + built.stderr, dist / f"{stem}.tar.gz", dist / f"{stem}-py3-none-any.whl"


@pytest.fixture(scope="module")
def venv(release, tmp_path_factory):
    """A fresh virtualenv (no system site-packages) with the wheel installed by pip, as a user
    installs it: its install_requires come from the index."""
    home = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", str(home))
    run(str(home / "bin" / "python"), "-m", "pip", "install", "-q", str(release[2]),
        env=user_env(home), timeout=BUILD_TIMEOUT)
    return home


def user_env(home):
    """A user's shell with the venv activated: nothing of the checkout or of our settings."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PREFORK_EXAMPLES_DIR")
           and not key.startswith("PREFORK_QUEUE_")}
    env.update(VIRTUAL_ENV=str(home), PATH=f"{home / 'bin'}{os.pathsep}{env['PATH']}")
    return env


def test_the_build_declares_its_package_data_and_passes_twine(release):
    output, sdist, wheel = release
    assert [line for line in output.splitlines() if IGNORED_PACKAGE in line] == []
    run(sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel))


def test_the_wheel_holds_every_file_of_the_package_and_the_sdist_the_tests_too(release):
    _, sdist, wheel = release
    package = {name for name in checkout_files("prefork") if not name.endswith(".pyc")}
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"prefork/py.typed", "prefork/schema/mysql/0001_jobs.sql",
            "prefork/dashboard/templates/base.html", "prefork/dashboard/static/dashboard.css"} <= package
    assert package - in_wheel == set()
    source = {name for name in checkout_files("prefork", "tests", "conf") if not name.endswith(".pyc")}
    assert {"tests/conftest.py", "conf/prefork-queue.service"} <= source
    assert (source | {"CHANGELOG.md", "README.md", "setup.cfg", "pyproject.toml"}) - in_sdist == set()


def test_the_version_is_written_once():
    """setup.cfg holds the version; the package reads it from its metadata."""
    version = declared_version()
    written = [name for name in checkout_files("prefork") if name.endswith(".py")
               and f'"{version}"' in (ROOT / name).read_text()]
    assert written == []


def test_the_wheel_alone_runs_the_quick_start_and_doctor(venv, tmp_path):
    workdir, env = tmp_path / "empty", user_env(venv)
    workdir.mkdir()
    where = run(str(venv / "bin" / "python"), "-c", "import prefork; print(prefork.__file__)",
                cwd=workdir, env=env)
    assert Path(where.stdout.strip()).is_relative_to(venv / "lib"), where.stdout
    cli = str(venv / "bin" / "prefork-queue")
    assert run(cli, "--version", cwd=workdir, env=env).stdout.strip() == f"prefork-queue {declared_version()}"
    log = (tmp_path / "supervisor.log").open("w")
    # Its own session, as a terminal's: Ctrl-C reaches the whole group.
    supervisor = subprocess.Popen([cli, "--workers", "2"], cwd=workdir, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: all_workers_up(supervisor, log), timeout=60, message="the supervisor's 2 workers")
        enqueue_quick_start_jobs(cli, workdir, env)
        wait_until(lambda: statuses(cli, workdir, env) == ["done", "done", "dead", "done"], timeout=120,
                   interval=0.5, message="jobs 1-4 done, done, dead, done")
        assert json.loads((workdir / "prefork-reports" / "report-4.json").read_text())["title"] == "weekly"
        os.killpg(supervisor.pid, signal.SIGINT)
        assert supervisor.wait(timeout=90) == 0, Path(log.name).read_text()
    finally:
        if supervisor.returncode is None:      # not reaped yet: its group id is still ours
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait(timeout=30)
        kill_left_in(workdir)
        log.close()
    doctor = run(cli, "doctor", cwd=workdir, env=env)
    assert "no check failed" in doctor.stdout, doctor.stdout


def all_workers_up(supervisor, log):
    assert supervisor.poll() is None, f"exited {supervisor.returncode}:\n{Path(log.name).read_text()}"
    return "master [default] workers 2/2 " in titles([supervisor.pid]).get(supervisor.pid, "")


def kill_left_in(workdir):
    """Kill any process still running in workdir (a worker whose supervisor died)."""
    for proc in psutil.process_iter():
        with suppress(psutil.Error):
            if Path(proc.cwd()).is_relative_to(workdir):
                proc.kill()


def enqueue_quick_start_jobs(cli, workdir, env):
    jobs = [("sleep", '{"seconds": 1}'), ("fail-n-times", '{"times": 2}'),
            ("fail-n-times", '{"times": 9}', "--max-attempts", "2"),
            ("report", '{"title": "weekly"}', "--key", "weekly-2026-48")]
    ids = [run(cli, "enqueue", *job, cwd=workdir, env=env).stdout.strip() for job in jobs]
    assert ids == ["1", "2", "3", "4"]


def statuses(cli, workdir, env):
    shown = (run(cli, "show", str(job), cwd=workdir, env=env).stdout for job in range(1, 5))
    return [json.loads(job)["status"] for job in shown]
