"""The dashboard's HTTP enqueue endpoint (POST /api/enqueue), over real HTTP to a real
`prefork-queue dashboard` process: off unless a token is configured (from the
environment or a file, never a flag); a job in, its id out, the same id for a
repeated idempotency key; and every refusal (no or a wrong token 401, another
site's Origin 403, another Host 400, bad input 400, 413, 415) a one-line answer with
the usual headers that changes nothing."""
import json

import pytest
from conftest import run_cli
from dashboard_helpers import DashboardProcess, assert_secured
from dashboard_helpers import dashboard, queue_store  # noqa: F401  (pytest fixtures)
from harness import catalogued

from prefork.jobs import MAX_KEY_LENGTH

TOKEN = "t0ken-" + "x7" * 20   # 46 characters
TOKEN_ENV = "PREFORK_QUEUE_DASHBOARD_ENQUEUE_TOKEN"
JOB = {"type": "mail.send", "payload": {"to": "ada@example.com"}, "queue": "mail",
       "priority": -3, "max_attempts": 7, "key": "welcome-ada"}


def post_job(client, body, token=TOKEN, content_type="application/json", **headers):
    sent = {"Content-Type": content_type, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.request("POST", "/api/enqueue", data, sent)


def job_count(db):
    return db.scalar("SELECT COUNT(*) FROM prefork_jobs")


def refused(answer, status):
    """The one-line {"error": ...} of a refusal with the usual headers."""
    assert answer.status == status, (answer.status, answer.text)
    assert_secured(answer)
    assert answer.headers["cache-control"] == "no-store"
    message = answer.json()["error"]
    assert message.strip() and "\n" not in message, message
    return message


def events(process, name):
    return [event for event in map(json.loads, process.stderr().splitlines())
            if event["event"] == catalogued(name)]


def test_it_is_off_unless_a_token_is_configured(dashboard, db):
    process = dashboard("--log-format", "json")
    message = refused(post_job(process.client(), JOB), 404)
    assert "dashboard_enqueue_token" in message
    assert job_count(db) == 0
    assert [event["enqueue_endpoint"] for event in events(process, "dashboard_started")] == \
        [False]


def test_a_job_in_its_id_out_and_the_same_id_for_a_repeated_key(dashboard, db):
    client = dashboard(env={TOKEN_ENV: TOKEN}).client()
    answer = post_job(client, JOB)
    assert answer.status == 200, answer.text
    assert_secured(answer)
    job_id = answer.json()["id"]
    row = db.row(job_id)
    assert (row["job_type"], row["queue"], row["priority"], row["max_attempts"],
            row["idempotency_key"], row["status"], row["attempts"]) == \
        ("mail.send", "mail", -3, 7, "welcome-ada", "ready", 0)
    assert json.loads(row["payload"]) == {"to": "ada@example.com"}
    again = post_job(client, {**JOB, "payload": {"to": "someone else"}})
    assert again.status == 200 and again.json() == {"id": job_id}
    assert job_count(db) == 1
    assert json.loads(db.row(job_id)["payload"]) == {"to": "ada@example.com"}
    # Without a key, each request is a job of its own; the defaults are enqueue's.
    other = post_job(client, {"type": "mail.send"}).json()["id"]
    assert other != job_id and job_count(db) == 2
    row = db.row(other)
    assert (row["queue"], row["priority"], row["max_attempts"], row["payload"]) == \
        ("default", 0, 5, "{}")
    delayed = db.row(post_job(client, {"type": "mail.send", "delay": 3600}).json()["id"])
    assert (delayed["available_at"] - delayed["created_at"]).total_seconds() == \
        pytest.approx(3600, abs=1)


BAD_BODIES = (
    (b"{not json", "invalid JSON body"),
    (b"\xff\xfe{", "invalid JSON body"),
    ("[1, 2]", "JSON object"),
    ({"payload": {}}, "\"type\""),
    ({"type": "mail.send", "run_at": "tomorrow"}, "unknown field 'run_at'"),
    ({"type": "no spaces allowed"}, "invalid job type"),
    ({"type": "mail.send", "queue": "a/b"}, "invalid queue name"),
    ({"type": "mail.send", "payload": [1]}, "payload must be a JSON object"),
    ({"type": "mail.send", "payload": "not json"}, "invalid JSON payload"),
    ({"type": "mail.send", "priority": 40000}, "priority must be"),
    ({"type": "mail.send", "delay": -1}, "delay must be"),
    ({"type": "mail.send", "max_attempts": 0}, "max attempts"),
    ({"type": "mail.send", "key": "invoice-7 "}, "whitespace"),
    ({"type": "mail.send", "key": "k" * (MAX_KEY_LENGTH + 1)}, "idempotency key must be"),
    ({"type": "mail.send", "payload": {"blob": "x" * 70_000}}, "max_payload_bytes"),
)


def test_every_refusal_is_one_line_with_the_usual_headers_and_changes_nothing(dashboard, db):
    process = dashboard("--log-format", "json", env={TOKEN_ENV: TOKEN})
    client = process.client()
    kept = post_job(client, JOB).json()["id"]
    before = db.row(kept)
    for body, expected in BAD_BODIES:
        assert expected in refused(post_job(client, body), 400), body
    for token in (None, "", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "x" * len(TOKEN)):
        answer = post_job(client, JOB, token=token)
        assert "token" in refused(answer, 401), token
        assert answer.headers["www-authenticate"].lower().startswith("bearer")
    for authorization in (f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}"):
        answer = client.request("POST", "/api/enqueue", json.dumps(JOB),
                                {"Content-Type": "application/json",
                                 "Authorization": authorization})
        refused(answer, 401)
    for origin in ("https://evil.example", "null", f"http://{process.address}.evil.example"):
        assert "Origin" in refused(post_job(client, JOB, Origin=origin), 403), origin
    assert "Host" in refused(post_job(client, JOB, Host="evil.example"), 400)
    for content_type in ("application/x-www-form-urlencoded", "text/plain", ""):
        refused(post_job(client, JOB, content_type=content_type), 415)
    huge = json.dumps({**JOB, "key": "huge", "payload": {"blob": "x" * 300_000}})
    refused(post_job(client, huge), 413)
    answer = client.request("GET", "/api/enqueue")
    refused(answer, 405)
    assert answer.headers["allow"] == "POST"
    assert job_count(db) == 1 and db.row(kept) == before
    # A request from our own page (its Origin ours) with the token is taken.
    same = post_job(client, {**JOB, "key": "from-our-page"},
                    Origin=f"http://{process.address}")
    assert same.status == 200, same.text
    refusals = events(process, "dashboard_enqueue_refused")
    assert len(refusals) == 9 and all(event["address"] == "127.0.0.1" for event in refusals)
    assert [event["enqueue_endpoint"] for event in events(process, "dashboard_started")] == \
        [True]
    assert TOKEN not in process.stderr()


def test_with_handlers_configured_an_unknown_type_is_refused_as_enqueue_refuses_it(
        dashboard, db, queue_dsn):
    client = dashboard("--app", "dashboard_app", env={TOKEN_ENV: TOKEN}).client()
    message = refused(post_job(client, {"type": "dash.tpyo"}), 400)
    cli = run_cli("enqueue", "--app", "dashboard_app", "dash.tpyo", dsn=queue_dsn)
    assert message == cli.stderr.strip().removeprefix("prefork-queue: error: ")
    assert job_count(db) == 0
    assert post_job(client, {"type": "dash.ok"}).status == 200


def test_the_token_comes_from_the_environment_or_a_private_file_never_a_flag(
        sqlite_migrated, tmp_path):
    token_file = tmp_path / "enqueue-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with DashboardProcess(sqlite_migrated, "--dashboard-enqueue-token-file",
                          str(token_file)) as process:
        client = process.client()
        assert post_job(client, JOB).status == 200
        refused(post_job(client, JOB, token="wrong" * 8), 401)
    token_file.chmod(0o640)
    opened = run_cli("dashboard", "--dashboard-enqueue-token-file", str(token_file),
                     dsn=sqlite_migrated)
    assert opened.returncode == 2 and "accessible to its group" in opened.stderr, opened.stderr
    short = run_cli("dashboard", dsn=sqlite_migrated, **{TOKEN_ENV: "short"})
    assert short.returncode == 2, short.stderr
    assert "at least 32" in short.stderr and len(short.stderr.strip().splitlines()) == 1
    flag = run_cli("dashboard", "--dashboard-enqueue-token", TOKEN, dsn=sqlite_migrated)
    assert flag.returncode == 2 and "no --dashboard-enqueue-token flag" in flag.stderr
    assert TOKEN not in flag.stderr
    config = tmp_path / "pq.conf"
    config.write_text(f"[prefork-queue]\ndashboard_enqueue_token = {TOKEN}\n")
    in_file = run_cli("dashboard", "--config", str(config), dsn=sqlite_migrated)
    assert in_file.returncode == 2 and TOKEN_ENV in in_file.stderr, in_file.stderr
