"""The dashboard's edges, over real HTTP to a real `prefork-queue dashboard` process:
bad input of every kind is a 4xx with the usual headers and a one-line message and
changes nothing; an unexpected fault is a 500 with those headers, logged with its
traceback; a database outage is a 503 with Retry-After; a Host header naming
another site is refused (DNS rebinding); notices come from the session, never from
the URL; and what held before still holds (a new session at each login, 414 on a
huge query string)."""
import html
import json
import re
from urllib.parse import quote

import pytest
from conftest import run_cli, wait_until
from dashboard_helpers import PASSWORD, DashboardProcess, assert_secured, make_dead
from dashboard_helpers import dashboard, queue_store  # noqa: F401  (pytest fixtures)
from harness import catalogued
from throwaway_db import ThrowawayMariaDB

from prefork.jobs import new_job

TOO_BIG = "9999999999999999999"   # 19 digits, over SQLite's (and BIGINT's) largest integer
BAD_GETS = (
    "/jobs?id=%C2%B2", "/api/jobs?after=%C2%B2", "/jobs?after=%C2%B2", "/api/jobs?id=%D9%A3",
    "/jobs?from=0001-01-01T00:00%2B00:01", "/api/jobs?to=9999-12-31T23:59-05:00",
    "/api/jobs?to=9999-12-31T23:59", "/dead?from=0001-01-01T00:00%2B00:01",
    f"/jobs/{TOO_BIG}", f"/api/jobs/{TOO_BIG}", f"/api/jobs?after={TOO_BIG}",
    f"/jobs?id={TOO_BIG}", "/jobs?status=%FF", "/api/throughput?range=%00",
)
NOTICE_SPOOF = "/dead?notice=retry&count=0.+ALERT:+all+jobs+lost,+call+IT+at+evil.example;"


def one_line_message(answer):
    """The one-line message of an error answer: JSON's "error", or the page's problem."""
    if answer.headers["content-type"].startswith("application/json"):
        message = answer.json()["error"]
    else:
        found = re.search(r'id="problem">([^<]*)</p>', answer.text)
        assert found, answer.text
        message = html.unescape(found.group(1))
    assert message.strip() and "\n" not in message, message
    return message


def assert_refused(answer, statuses=range(400, 500)):
    assert answer.status in statuses, (answer.status, answer.text)
    assert_secured(answer)
    assert answer.headers["cache-control"] == "no-store"
    return one_line_message(answer)


def rows(db, job_ids):
    return [db.row(job_id) for job_id in job_ids]


def test_every_bad_input_is_a_4xx_with_the_usual_headers_and_changes_nothing(
        dashboard, queue_store, db):
    dead_id = make_dead(queue_store, key="dead-1")
    ready_id = queue_store.enqueue(new_job("mail.send", {}, key="ready-1"))
    client = dashboard(password=PASSWORD).client()
    token = client.log_in()
    for path in BAD_GETS:
        message = assert_refused(client.request("GET", path))
        assert re.search(r"must|no job|no such|unknown", message), (path, message)
    before = rows(db, (dead_id, ready_id))
    for path, form in (("/dead/retry", {"id": "²"}), ("/dead/retry", {"id": [dead_id, "²"]}),
                       ("/dead/discard", {"id": "٣"}), ("/dead/retry", {"id": TOO_BIG}),
                       ("/jobs/cancel", {"id": "²"}), ("/jobs/cancel", {"id": TOO_BIG}),
                       ("/api/dead/batch", {"action": "retry", "after": "²"}),
                       ("/api/dead/batch", {"action": "retry", "to": "9999-12-31T23:59-05:00"})):
        message = assert_refused(client.post(path, {"csrf": token, **form}))
        assert "id" in message or "no job" in message or "must" in message, (path, message)
    assert rows(db, (dead_id, ready_id)) == before


def test_an_unexpected_fault_is_a_500_with_the_headers_and_its_traceback_logged(
        sqlite_migrated, sqlite_store, sqlite_db):
    job_id = sqlite_store().enqueue(new_job("mail.send", {}))
    # Another program wrote a time no store of ours writes.
    sqlite_db.execute("UPDATE prefork_jobs SET created_at = 'the day before' WHERE id = %s",
                      (job_id,))
    with DashboardProcess(sqlite_migrated, "--log-format", "json") as process:
        client = process.client()
        for path in (f"/jobs/{job_id}", f"/api/jobs/{job_id}"):
            answer = client.get(path)
            assert_refused(answer, statuses=(500,))
            assert "the dashboard's log" in one_line_message(answer)
            assert "the day before" not in answer.text   # no exception text to the client
        assert client.get("/queues").status == 200   # still serving
        failures = [event for event in map(json.loads, process.stderr().splitlines())
                    if event["event"] == catalogued("dashboard_request_failed")]
    assert [event["path"] for event in failures[:2]] == [f"/jobs/{job_id}", f"/api/jobs/{job_id}"]
    assert "Traceback (most recent call last)" in failures[0]["traceback"]
    assert failures[0]["error"] == "ValueError"


def test_a_database_outage_is_503_with_retry_after_until_it_is_back(tmp_path):
    with ThrowawayMariaDB(tmp_path) as server:
        migrated = run_cli("migrate", dsn=server.dsn)
        assert migrated.returncode == 0, migrated.stderr
        with DashboardProcess(server.dsn) as process:
            client = process.client()
            for _ in range(12):   # every server thread opens its connection
                assert client.get("/api/jobs").status == 200
            server.stop()
            # The lost connection first, then reconnections refused: 503 each time.
            for path in ("/api/jobs", "/jobs", "/", "/api/overview") * 4:
                answer = client.get(path)
                message = assert_refused(answer, statuses=(503,))
                assert int(answer.headers["retry-after"]) > 0
                assert re.search(r"database|connect", message), message
            server.start()
            wait_until(lambda: client.get("/api/jobs").status == 200, timeout=30,
                       message="the dashboard answering again")
            # Every server thread's connection was lost while idle: the first read of
            # each is answered on a new one, never with a 503 once the server is back.
            for path in ("/api/jobs", "/jobs", "/", "/api/overview") * 4:
                assert client.get(path).status == 200, path


def test_a_foreign_host_header_is_refused_even_with_a_matching_origin(dashboard, queue_store, db):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
    Host: evil.example (and, for a POST, Origin: http://evil.example): refused, and
    nothing of the queue's data is in the answer."""
    dead_id = make_dead(queue_store, key="secret-order-42")
    process = dashboard(password=PASSWORD)
    client = process.client()
    token = client.log_in()
    port = process.address.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}",
                 f"localhost.evil.example:{port}", f"[::2]:{port}", "", "local host"):
        for path in ("/api/jobs", f"/api/jobs/{dead_id}", "/jobs", "/"):
            answer = client.request("GET", path, headers={"Host": host})
            message = assert_refused(answer, statuses=(400,))
            assert "Host" in message and "secret-order-42" not in answer.text, (host, path)
    before = db.row(dead_id)
    rebound = client.post("/dead/retry", {"csrf": token, "id": [dead_id]},
                          origin=f"http://evil.example:{port}",
                          headers={"Host": f"evil.example:{port}"})
    assert_refused(rebound, statuses=(400,))
    assert 'data-csrf=""' in rebound.text and token not in rebound.text
    assert db.row(dead_id) == before
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"LocalHost:{port}"):
        assert client.request("GET", "/api/jobs", headers={"Host": host}).status == 200, host


def test_the_host_names_of_a_reverse_proxy_are_a_setting(dashboard, queue_store, db):
    dead_id = make_dead(queue_store)
    process = dashboard("--dashboard-allowed-hosts", "queue.example.com, .ops.example",
                        password=PASSWORD)
    client = process.client()
    token = client.log_in()
    for host in ("queue.example.com", "QUEUE.example.com:443", "a.ops.example", "ops.example"):
        assert client.request("GET", "/api/jobs", headers={"Host": host}).status == 200, host
    for host in ("example.com", "evil-queue.example.com", "xops.example"):
        assert_refused(client.request("GET", "/api/jobs", headers={"Host": host}), (400,))
    answer = client.post("/dead/retry", {"csrf": token, "id": [dead_id]},
                         origin="https://queue.example.com",
                         headers={"Host": "queue.example.com"})
    assert answer.status == 303 and db.row(dead_id)["status"] == "ready"


def test_notices_come_from_the_session_never_from_the_url(dashboard, queue_store):
    dead_ids = [make_dead(queue_store, queue="mail") for _ in range(2)]
    client = dashboard(password=PASSWORD).client()
    stranger = dashboard().client()
    for who in (client, stranger):
        page = who.request("GET", NOTICE_SPOOF)
        assert page.status == 200 and "ALERT" not in page.text and 'id="notice"' not in page.text
    token = client.log_in()
    assert "ALERT" not in client.request("GET", NOTICE_SPOOF).text
    answer = client.post("/dead/retry", {"csrf": token, "id": dead_ids})
    assert answer.status == 303 and "?" not in answer.headers["location"]
    page = client.get(answer.headers["location"]).text
    assert re.search(r'id="notice">Retried 2 job\(s\)\.</p>', page), page
    assert 'id="notice"' not in client.get("/dead").text   # shown once
    assert client.post("/queues/pause", {"csrf": token, "queue": "mail"}).status == 303
    spoofed = client.request("GET", "/queues?notice=paused&queue=" + quote("<b>x</b>"))
    assert "Queue mail paused." in spoofed.text and "&lt;b&gt;" not in spoofed.text


def test_a_login_gets_a_new_session_and_a_huge_query_string_is_414(dashboard, queue_store):
    process = dashboard(password=PASSWORD)
    client = process.client()
    client.log_in()
    first = client.cookie
    client.log_in()   # sends the first cookie: a login never keeps a session it is given
    assert client.cookie != first
    assert 'id="logout"' in client.get("/").text
    answer = client.request("GET", "/jobs?key=" + "a" * 100_000)
    assert answer.status == 414
