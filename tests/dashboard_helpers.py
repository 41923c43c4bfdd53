"""The dashboard under test: a real `prefork-queue dashboard` subprocess on a port the
system chose, an HTTP client that keeps its session cookie, and jobs to look at.

The command is run as `python -c ...` importing prefork.cli.dashboard, which
registers it (the same thing main.py's import does)."""
import http.client
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlencode

import pytest
from conftest import cli_env, wait_until

from prefork.jobs import new_job
from prefork.retry import Decision

DASHBOARD_COMMAND = [sys.executable, "-m", "prefork", "dashboard"]
SERVING = re.compile(r"dashboard serving on http://([^/]+)(/\S*)? ")
PASSWORD = "correct horse battery staple"
WORKER = "dashboard-test:1"
# What every answer carries, pages, JSON, errors and redirects alike.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


class DashboardProcess:
    """`prefork-queue dashboard --dashboard-bind 127.0.0.1:0 ARGS` on `dsn`; .url once it
    listens. Use as a context manager: the process is stopped (killed if need be) at exit."""

    def __init__(self, dsn, *args, password=None, env=None, timeout=20):
        extra = dict(env or {})
        if password is not None:
            extra["PREFORK_QUEUE_DASHBOARD_PASSWORD"] = password
        # stderr (its log) to a file: a pipe nobody reads would block it once full.
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [*DASHBOARD_COMMAND, "--dashboard-bind",
             "127.0.0.1:0", *args], stdout=subprocess.PIPE, stderr=self.log,
            env=cli_env(dsn, **extra))
        try:
            line = self._first_line(timeout)
        except BaseException:
            self.stop()
            raise
        match = SERVING.search(line)
        assert match, f"unexpected first line {line!r}; stderr: {self.stderr()}"
        self.address, self.prefix = match.group(1), (match.group(2) or "/").rstrip("/")

    def _first_line(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([self.process.stdout], [], [], 0.1)[0]:
                return self.process.stdout.readline().decode()
            if self.process.poll() is not None:
                raise AssertionError(f"dashboard exited {self.process.returncode}: "
                                     f"{self.stderr()}")
        raise AssertionError("the dashboard did not say it listens")

    @property
    def url(self):
        return f"http://{self.address}{self.prefix}"

    def client(self):
        host, port = self.address.rsplit(":", 1)
        return Client(host, int(port), self.prefix)

    def stderr(self):
        """What it logged so far."""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Answer:
    def __init__(self, response):
        self.status = response.status
        self.headers = {name.lower(): value for name, value in response.getheaders()}
        self.cookies = response.headers.get_all("Set-Cookie") or []
        self.body = response.read()
        self.text = self.body.decode("utf-8", "replace")

    def json(self):
        import json
        return json.loads(self.body)


class Client:
    """HTTP/1.1 to the dashboard; keeps the session cookie it is given; sends an Origin
    naming the dashboard's own host on POST unless told another (or none)."""

    def __init__(self, host, port, prefix=""):
        self.host, self.port, self.prefix = host, port, prefix
        self.cookie = None

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=15)
        try:
            sent = dict(headers or {})
            if self.cookie:
                sent.setdefault("Cookie", self.cookie)
            conn.request(method, self.prefix + path, body=body, headers=sent)
            answer = Answer(conn.getresponse())
        finally:
            conn.close()
        for value in answer.cookies:
            pair = value.split(";", 1)[0]
            self.cookie = None if pair.endswith("=") else pair
        return answer

    def get(self, path, **query):
        return self.request("GET", path + ("?" + urlencode(query) if query else ""))

    def post(self, path, form=None, origin="same", headers=None):
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        if origin == "same":
            sent["Origin"] = f"http://{self.host}:{self.port}"
        elif origin is not None:
            sent["Origin"] = origin
        return self.request("POST", path, urlencode(form or {}, doseq=True), sent)

    def log_in(self, password=PASSWORD):
        answer = self.post("/login", {"password": password})
        assert answer.status == 303, answer.text
        return self.csrf()

    def csrf(self):
        page = self.get("/").text
        return re.search(r'data-csrf="([^"]*)"', page).group(1)


def make_dead(store, queue="default", job_type="mail.send", key=None, payload=None,
              error="PlannedFailure"):
    """A dead job (claimed once, failed for good); its id."""
    job_id = store.enqueue(new_job(job_type, payload or {}, queue=queue, key=key))
    claimed = store.claim([queue], WORKER, 30)
    assert [job.id for job in claimed] == [job_id]
    assert store.fail(claimed[0], error, Decision(dead=True, delay=0))
    return job_id


def wait_for_status(store, job_id, status, timeout=10):
    return wait_until(lambda: store.get(job_id)["status"] == status, timeout=timeout,
                      message=f"job {job_id} to be {status}")




@pytest.fixture
def queue_store(backend_store):
    return backend_store()


@pytest.fixture
def dashboard(queue_dsn, queue_store):
    """start(*args, password=None) -> a DashboardProcess on the test's database."""
    started = []

    def start(*args, **kwargs):
        started.append(DashboardProcess(queue_dsn, *args, **kwargs))
        return started[-1]
    yield start
    for process in started:
        process.stop()


def assert_secured(answer):
    for name, value in SECURITY_HEADERS.items():
        assert value in answer.headers.get(name, ""), (name, answer.headers)
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert "unsafe-inline" not in answer.headers["content-security-policy"]
