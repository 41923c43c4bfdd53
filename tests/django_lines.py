"""The Python interpreters tests/contrib/test_django.py runs the test project under: this one
with Django 5.2 LTS and the django-tasks backport, and a python3.12 venv with
Django 6 (its own django.tasks); and Django 6's own Tasks tests, from its sdist, for
tests/contrib/test_django_suite.py. The venv and the tests are made once in a cache
directory keyed by the versions and reused (PREFORK_TEST_CACHE, else
~/.cache/prefork-queue-tests)."""
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One release, so that Django's tests (test_django_suite.py) are those of the Django
# the venv runs: moving to another is changing this line and seeing what fails.
DJANGO6_VERSION = "6.0.10"
DJANGO6 = f"django=={DJANGO6_VERSION}"
BACKPORT = ("django>=5.2,<6", "django-tasks")   # what this interpreter needs (pip install)


@dataclass(frozen=True)
class DjangoLine:
    name: str
    python: str            # the interpreter that runs manage.py
    prefork_queue: str     # its `prefork-queue` console script
    mysqlclient: bool      # Django's own MySQL driver imports there


def this_python():
    """Django 5.2 + the backport under the interpreter running the tests."""
    try:
        import django
        import django_tasks  # noqa: F401
    except ImportError:
        pytest.skip(f"Django 5.2 line: python3 -m pip install {' '.join(map(repr, BACKPORT))}")
    if django.VERSION[:2] != (5, 2):
        pytest.skip(f"Django 5.2 line: this interpreter has Django {django.__version__}")
    script = shutil.which("prefork-queue", path=str(Path(sys.executable).parent)) \
        or shutil.which("prefork-queue")
    return DjangoLine("django5.2", sys.executable, script, _has_mysqlclient(sys.executable))


def django6_venv():
    """Django 6 under python3.12, in a venv made (or reused) in the cache directory."""
    python = _python312()
    if python is None:
        pytest.skip("Django 6 line: no python3.12 on this machine")
    key = hashlib.sha256(f"{python}|{_version(python)}|{DJANGO6}|mysqlclient|"
                         f"{(ROOT / 'setup.cfg').read_text()}".encode()).hexdigest()[:12]
    venv = _cache() / f"django6-{key}"

    def make():
        _run([python, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", DJANGO6])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(ROOT)])
        # Built from source: needs libmariadb-dev and pkg-config; the tests that
        # need it say so when it is missing.
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        "mysqlclient"], capture_output=True, timeout=600)
    _made_once(venv, make)
    python = str(venv / "bin" / "python")
    return DjangoLine("django6", python, str(venv / "bin" / "prefork-queue"),
                      _has_mysqlclient(python))


def django6_tests(line):
    """The folder of Django's own tests/tasks (DJANGO6_VERSION's sdist: pip download,
    with `line`'s python3.12 pip), unchanged."""
    folder = _cache() / f"django-{DJANGO6_VERSION}-tests"

    def make():
        with tempfile.TemporaryDirectory() as download:
            _run([line.python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                  ":all:", DJANGO6, "-d", download])
            (sdist,) = Path(download).glob("*.tar.gz")
            prefix = f"django-{DJANGO6_VERSION}/tests/"
            with tarfile.open(sdist) as archive:
                members = [member for member in archive.getmembers()
                           if member.name.startswith(prefix + "tasks/")]
                for member in members:
                    member.name = member.name.removeprefix(prefix)
                archive.extractall(folder, members=members, filter="data")
    _made_once(folder, make)
    return folder / "tasks"


def _cache():
    cache = Path(os.environ.get("PREFORK_TEST_CACHE") or Path.home() / ".cache" /
                 "prefork-queue-tests")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def _made_once(path, make):
    """`path` in the cache, made by make() unless a run made it before: one maker at a
    time, parallel runs wait and then reuse it; what a failed or interrupted making
    left is removed and made again."""
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "ready").exists():
            shutil.rmtree(path, ignore_errors=True)
            make()
            (path / "ready").write_text("made\n")


def _has_mysqlclient(python):
    """mysqlclient itself (not PyMySQL standing in for it) imports under `python`."""
    check = "import MySQLdb, sys; sys.exit('pymysql' in MySQLdb.__name__)"
    return subprocess.run([python, "-c", check], capture_output=True).returncode == 0


def _python312():
    candidates = [shutil.which("python3.12"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def _version(python):
    return subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _run(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
