"""The Sentry integration for real: the Sentry SDK in a real supervisor's workers sends
its envelopes to an HTTP server of this test (a DSN http://KEY@127.0.0.1:PORT/1), and
the test reads what arrived: one report per failed attempt, tagged with the job's
type, queue, id, attempt and outcome, the payload only when asked; enabled from the
configuration (a DSN in the environment or a file) or by the application's init()."""
import gzip
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import cli_env, run_cli, wait_until
from harness import supervisor_starter

from prefork.jobs import new_job

KEY = "c0ffee0123456789c0ffee0123456789"   # the DSN's public key: never in a log
MARKER = "PAYLOAD-MARKER-7f3a"
BASE_ARGS = ("--workers", "1", "--poll-interval", "0.2", "--retry-base", "0.05",
             "--retry-cap", "0.1")


class SentryServer:
    """A stand-in for Sentry's ingestion: it keeps each envelope's events."""

    def __init__(self):
        self.bodies = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                received.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.dsn = f"http://{KEY}@127.0.0.1:{self.server.server_port}/1"

    def events(self):
        """The events (items of type "event") of every envelope received so far."""
        found = []
        for path, body in list(self.bodies):
            assert path == "/api/1/envelope/", path
            lines = body.split(b"\n")
            for header, payload in zip(lines[1::2], lines[2::2]):
                if json.loads(header).get("type") == "event":
                    found.append(json.loads(payload))
        return found

    def wait_events(self, count):
        return wait_until(lambda: (lambda found: found if len(found) >= count else None)(
            self.events()), timeout=60, message=f"{count} Sentry events")

    def raw(self):
        return b"".join(body for _, body in self.bodies)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sentry_server():
    server = SentryServer()
    yield server
    server.close()


@pytest.fixture
def supervisor(tmp_path, sqlite_migrated):
    with supervisor_starter(tmp_path, sqlite_migrated, *BASE_ARGS) as start:
        yield start


def failing_job(sqlite_store):
    return sqlite_store().enqueue(new_job("sentry.flaky", {"customer_note": MARKER},
                                          max_attempts=2))


def check_reports(events, job_id):
    """The two reports of a job that failed twice (retried, then dead)."""
    assert [(event["level"], event["tags"]) for event in events] == [
        (level, {"prefork.job_type": "sentry.flaky", "prefork.queue": "default",
                 "prefork.job_id": str(job_id), "prefork.attempt": str(attempt),
                 "prefork.outcome": outcome})
        for level, attempt, outcome in (("warning", 1, "retry"), ("error", 2, "dead"))]
    for event in events:
        job = event["contexts"]["prefork_job"]
        assert (job["id"], job["type"], job["max_attempts"]) == (job_id, "sentry.flaky", 2)
        chain = [(value["type"], value["value"]) for value in event["exception"]["values"]]
        assert chain == [("KeyError", ""), ("ValueError", "upstream said no")]


def test_a_dsn_in_the_environment_reports_each_failed_attempt_without_its_payload(
        supervisor, sqlite_store, sqlite_db, sentry_server):
    job_id = failing_job(sqlite_store)
    sup = supervisor("--app", "sentry_app", env={"PREFORK_QUEUE_SENTRY_DSN": sentry_server.dsn})
    check_reports(sentry_server.wait_events(2), job_id)
    assert MARKER.encode() not in sentry_server.raw()
    events = sentry_server.events()
    assert all("prefork.payload" not in event.get("extra", {}) for event in events)
    frames = [frame for event in events for value in event["exception"]["values"]
              for frame in value["stacktrace"]["frames"]]
    assert frames and all("vars" not in frame for frame in frames)   # the handler's locals
    assert sqlite_db.row(job_id)["status"] == "dead"
    enabled = sup.wait_event("sentry_enabled")[0]
    assert (enabled["host"], enabled["send_payload"]) == ("127.0.0.1", False)
    assert KEY not in sup.log_text()
    assert not sup.events("hook_failed") and not sup.events("hook_timed_out")


def test_a_dsn_file_and_sentry_send_payload_send_the_payload(supervisor, sqlite_store,
                                                             sentry_server, tmp_path):
    dsn_file = tmp_path / "sentry-dsn"
    dsn_file.write_text(sentry_server.dsn + "\n")
    dsn_file.chmod(0o600)
    job_id = failing_job(sqlite_store)
    supervisor("--app", "sentry_app", "--sentry-dsn-file", str(dsn_file),
               "--sentry-send-payload", "true")
    events = sentry_server.wait_events(2)
    check_reports(events, job_id)
    assert [event["extra"]["prefork.payload"] for event in events] == \
        [{"customer_note": MARKER}] * 2
    assert any("vars" in frame for value in events[0]["exception"]["values"]
               for frame in value["stacktrace"]["frames"])


def test_the_application_enables_it_with_init(supervisor, sqlite_store, sentry_server):
    job_id = failing_job(sqlite_store)
    supervisor("--app", "sentry_init_app", env={"SENTRY_TEST_DSN": sentry_server.dsn})
    events = sentry_server.wait_events(2)
    check_reports(events, job_id)
    assert events[0]["extra"]["prefork.payload"] == {"customer_note": MARKER}


def test_a_dsn_that_is_not_one_is_a_one_line_error(sqlite_migrated):
    result = run_cli("work", "--app", "sentry_app", "--stop-when-empty", dsn=sqlite_migrated,
                     PREFORK_QUEUE_SENTRY_DSN=f"nonsense-{KEY}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(
        "sentry_dsn is not a Sentry DSN (https://KEY@HOST/PROJECT)")
    assert KEY not in result.stderr


IMPORTED = ("from prefork import config\nfrom prefork.cli.helpers import import_handlers\n"
            "import_handlers(config.load({'app': 'sentry_app'}))\nimport sys\n"
            "print('sentry_sdk' in sys.modules)")


@pytest.mark.parametrize("dsn, imported", [(None, "False"), ("http://k@127.0.0.1:9/1", "True")])
def test_the_sentry_sdk_is_imported_only_when_a_dsn_is_configured(sqlite_migrated, dsn,
                                                                   imported):
    env = cli_env(sqlite_migrated, **({"PREFORK_QUEUE_SENTRY_DSN": dsn} if dsn else {}))
    result = subprocess.run([sys.executable, "-c", IMPORTED], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == imported, result.stderr
