"""The dashboard over real HTTP: a real `prefork-queue dashboard` process on MariaDB and
on SQLite. Each page renders, each filter returns what it should, keyset paging
holds while jobs change, actions change exactly what they say, and what must be
refused (no password, no login, no CSRF token, a foreign Origin, a wrong password)
is refused and changes nothing. Hostile data renders inert."""
import http.client
import io
import json
import re
import signal
import subprocess
import sys
import threading
import time
import wsgiref.util
from urllib.parse import urlencode

import pytest
from conftest import admin_connection, cli_env
from harness import catalogued
from dashboard_helpers import (DASHBOARD_COMMAND, PASSWORD, DashboardProcess, assert_secured,
                               make_dead)
from dashboard_helpers import dashboard, queue_store  # noqa: F401  (pytest fixtures)

from prefork.dashboard import create_app
from prefork.jobs import new_job
from prefork.limits.rules import LimitRule
from prefork.store.sqlite.store import SQLiteStore

PAGES = ("/", "/jobs", "/dead", "/queues", "/schedules", "/restart")
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
SCHEDULE_CONFIG = """
[prefork-queue]
[schedule:nightly]
type = report.build
cron = 0 3 * * *
queue = reports
"""


def enqueue(store, job_type="mail.send", queue="default", key=None, payload=None):
    return store.enqueue(new_job(job_type, payload or {}, queue=queue, key=key))


# -- pages and the API ------------------------------------------------------------------

def test_every_page_and_api_answer_renders(dashboard, queue_store, tmp_path):
    dead_id = make_dead(queue_store, queue="mail", key="welcome-1", payload={"to": "a@b.c"})
    ready_id = enqueue(queue_store, "report.build", "reports", key="schedule:nightly:2026")
    config = tmp_path / "dash.conf"
    config.write_text(SCHEDULE_CONFIG)
    client = dashboard("--config", str(config)).client()
    for path in PAGES + (f"/jobs/{dead_id}",):
        answer = client.get(path)
        assert answer.status == 200, (path, answer.text)
        assert answer.headers["content-type"].startswith("text/html")
        assert_secured(answer)
        assert "<script>" not in answer.text   # scripts are files: <script src=...></script>
    assert "mail" in client.get("/").text and "reports" in client.get("/queues").text
    job_page = client.get(f"/jobs/{dead_id}").text
    assert "welcome-1" in job_page and "PlannedFailure" in job_page and "a@b.c" in job_page
    schedules = client.get("/schedules").text
    assert "nightly" in schedules and "0 3 * * *" in schedules
    assert f'href="/jobs/{ready_id}"' in schedules   # its last enqueued job
    assert client.get("/jobs/999999").status == 404
    overview = client.get("/api/overview").json()
    assert {q["queue"]: q["dead"] for q in overview["queues"]} == {"mail": 1, "reports": 0}
    assert client.get("/api/throughput", range="day").json()["range"] == "day"
    assert client.get("/api/throughput", range="week").status == 400
    assert client.get(f"/api/jobs/{ready_id}").json()["queue"] == "reports"
    assert client.get("/api/schedules").json()["schedules"][0]["name"] == "nightly"
    for name, kind in (("dashboard.js", "text/javascript"), ("charts.js", "text/javascript"),
                       ("dashboard.css", "text/css")):
        answer = client.get(f"/static/{name}")
        assert answer.status == 200 and answer.headers["content-type"].startswith(kind)
    assert client.get("/static/..%2fapp.py").status == 404


def test_payload_keys_are_redacted_at_any_depth_in_any_case(dashboard, queue_store):
    job_id = enqueue(queue_store, payload={
        "Password": "hunter2", "user": {"api_KEY": "k-123", "name": "ann"},
        "list": [{"TOKEN": "t-456"}], "Authorization": {"nested": "s-789"}})
    client = dashboard().client()
    for text in (client.get(f"/jobs/{job_id}").text, client.get(f"/api/jobs/{job_id}").text):
        for secret in ("hunter2", "k-123", "t-456", "s-789"):
            assert secret not in text
        assert "ann" in text and "[redacted]" in text
    assert "lease_token" not in client.get(f"/api/jobs/{job_id}").json()


def test_each_filter_returns_what_it_should(dashboard, queue_store, db):
    a = enqueue(queue_store, "mail.send", "mail", key="order-1")
    b = enqueue(queue_store, "mail.send", "mail", key="order-2")
    c = enqueue(queue_store, "report.build", "reports", key="invoice-1")
    d = make_dead(queue_store, "other", "mail.digest", key="order_3%")
    client = dashboard().client()

    def ids(**query):
        answer = client.get("/api/jobs", **query)
        assert answer.status == 200, answer.text
        return [row["id"] for row in answer.json()["rows"]]

    assert ids() == [d, c, b, a]
    assert ids(queue="mail") == [b, a]
    assert ids(status="dead") == [d] and ids(status="ready") == [c, b, a]
    assert ids(type="mail.send") == [b, a]
    assert ids(id=str(c)) == [c]
    assert ids(key="order") == [d, b, a] and ids(key="order_3%") == [d]
    assert ids(key="order_") == [d]   # literally: _ is no wildcard
    created = {job_id: queue_store.get(job_id)["created_at"] for job_id in (a, b, c, d)}
    db.execute("UPDATE prefork_jobs SET created_at = %s WHERE id = %s",
               (created[a].replace(year=2020), a))
    assert ids(**{"from": "2021-01-01T00:00"}) == [d, c, b]
    assert ids(to="2021-01-01T00:00") == [a]
    assert ids(queue="mail", key="order-2") == [b]
    page = client.get("/jobs", queue="mail")
    assert page.status == 200 and f">{a}</a>" in page.text and f">{c}</a>" not in page.text
    assert f">{d}</a>" in client.get("/dead").text and f">{a}</a>" not in client.get("/dead").text
    for query in ({"status": "sleeping"}, {"id": "12x"}, {"from": "yesterday"}):
        answer = client.get("/jobs", **query)
        assert answer.status == 400
        assert re.search(r'id="problem">[^<\n]+</p>', answer.text), answer.text
        assert client.get("/api/jobs", **query).json()["error"]


def test_keyset_paging_has_no_gap_or_repeat_while_jobs_change(dashboard, queue_store, db):
    first = [enqueue(queue_store, queue="paged") for _ in range(120)]
    client = dashboard().client()
    seen, after, pages = [], "", 0
    while True:
        answer = client.get("/api/jobs", queue="paged", after=after).json()
        seen += [row["id"] for row in answer["rows"]]
        pages += 1
        # Meanwhile: new jobs arrive, and some seen and unseen ones change state.
        enqueue(queue_store, queue="paged")
        db.execute("UPDATE prefork_jobs SET status = 'dead' WHERE id IN (%s, %s)",
                   (first[pages * 7], first[-pages * 3]))
        if answer["next_after"] is None:
            break
        after = str(answer["next_after"])
        html = client.get("/jobs", queue="paged")   # the HTML page's link names the same cursor
        assert "older →" in html.text
    assert pages == 3
    assert seen == sorted(first, reverse=True)
    # The HTML pages' links walk the same way: "older →" to the end, "← newest" back.
    html_ids, path = [], "/jobs?queue=paged"
    while path:
        text = client.request("GET", path).text
        html_ids += [int(found) for found in re.findall(r'<td><a href="/jobs/(\d+)">', text)]
        older = re.search(r'<a id="older" href="([^"]+)"', text)
        path = older.group(1).replace("&amp;", "&") if older else None
        if older is None:
            assert re.search(r'<a id="newest" href="/jobs\?[^"]*queue=paged', text)
    api_ids, after = [], ""
    while after is not None:
        answer = client.get("/api/jobs", queue="paged", after=after).json()
        api_ids += [row["id"] for row in answer["rows"]]
        after = answer["next_after"] and str(answer["next_after"])
    assert html_ids == api_ids and len(api_ids) == 123


# -- read-only and the login -----------------------------------------------------------------

def test_read_only_shows_no_action_and_refuses_every_post(dashboard, queue_store):
    dead_id = make_dead(queue_store)
    client = dashboard().client()
    for path in PAGES + (f"/jobs/{dead_id}",):
        text = client.get(path).text
        assert 'method="post"' not in text and "read-only" in text, path
        assert "Retry" not in text and "Pause" not in text and "Log in" not in text
    assert client.get("/login").status == 404
    for path, form in (("/login", {"password": ""}), ("/dead/retry", {"id": dead_id}),
                       ("/dead/discard", {"id": dead_id}), ("/queues/pause", {"queue": "default"}),
                       ("/restart", {"host": "*"}), ("/api/dead/batch", {"action": "retry"}),
                       ("/jobs/cancel", {"id": dead_id}), ("/logout", {})):
        assert client.post(path, form).status == 403, path
    assert queue_store.get(dead_id)["status"] == "dead"
    assert queue_store.queue_overview()[0].paused is False


def test_a_wrong_password_is_refused_slowed_and_then_locked_out(dashboard, queue_store):
    client = dashboard(password=PASSWORD).client()
    started = time.monotonic()
    answer = client.post("/login", {"password": "wrong"})
    assert answer.status == 401 and "wrong password" in answer.text
    assert time.monotonic() - started >= 1.0
    assert client.cookie is None
    for _ in range(4):
        assert client.post("/login", {"password": PASSWORD[:-1]}).status == 401
    locked = client.post("/login", {"password": PASSWORD})
    assert locked.status == 429 and client.cookie is None


def test_a_login_sets_a_strict_http_only_cookie_and_logout_ends_it(dashboard, queue_store):
    client = dashboard(password=PASSWORD).client()
    answer = client.post("/login", {"password": PASSWORD})
    assert answer.status == 303
    (cookie,) = answer.cookies
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    token = client.csrf()
    assert token and 'id="logout"' in client.get("/").text
    assert client.post("/logout", {"csrf": token}).status == 303
    assert 'id="login-link"' in client.get("/").text


# -- actions ------------------------------------------------------------------------------------

def test_actions_change_exactly_what_they_say(dashboard, queue_store):
    one, two, three = (make_dead(queue_store, queue=q) for q in ("q1", "q2", "q3"))
    process = dashboard("--log-format", "json", password=PASSWORD)
    client = process.client()
    token = client.log_in()
    answer = client.post("/dead/retry", {"csrf": token, "id": [one], "back": "job"})
    assert answer.status == 303 and answer.headers["location"] == f"/jobs/{one}"
    assert "Retried 1 job" in client.get(answer.headers["location"]).text
    assert [queue_store.get(i)["status"] for i in (one, two, three)] == ["ready", "dead", "dead"]
    assert client.post("/dead/discard", {"csrf": token, "id": [two]}).status == 303
    assert queue_store.get(two) is None and queue_store.get(three)["status"] == "dead"
    assert client.post("/dead/discard", {"csrf": token, "id": [one]}).status == 303
    assert queue_store.get(one)["status"] == "ready"   # not dead: left alone
    assert client.post("/queues/pause", {"csrf": token, "queue": "q3"}).status == 303
    assert {q.queue: q.paused for q in queue_store.queue_overview()}["q3"] is True
    assert "Resume" in client.get("/queues").text
    assert client.post("/queues/resume", {"csrf": token, "queue": "q3"}).status == 303
    assert {q.queue: q.paused for q in queue_store.queue_overview()}["q3"] is False
    assert client.post("/queues/pause", {"csrf": token, "queue": "<b>"}).status == 400
    actions = [event for event in map(json.loads, process.stderr().splitlines())
               if event["event"] == catalogued("dashboard_action")]
    assert [(e["action"], e.get("jobs"), e.get("queue")) for e in actions] == [
        ("retry", 1, None), ("discard", 1, None), ("discard", 0, None), ("paused", None, "q3"),
        ("resumed", None, "q3")]
    assert client.post("/restart", {"csrf": token, "host": "nowhere"}).status == 400
    queue_store.register_process("web-1", 4242, ["q1"], 2, "test")
    assert "web-1" in client.get("/restart").text
    assert client.post("/restart", {"csrf": token, "host": "web-1"}).status == 303
    _, web_1, _ = queue_store.control_state("web-1")
    assert web_1 is not None and queue_store.control_state("web-2")[1] is None
    assert client.post("/restart", {"csrf": token, "host": "*"}).status == 303
    _, every_host, _ = queue_store.control_state("web-2")
    assert every_host is not None


def test_cancel_changes_exactly_what_it_says(dashboard, queue_store):
    running = enqueue(queue_store, key="running")
    assert [job.id for job in queue_store.claim(["default"], "dashboard-test:1", 60)] == [running]
    ready, other = enqueue(queue_store, key="ready"), enqueue(queue_store, key="other")
    process = dashboard("--log-format", "json", password=PASSWORD)
    client = process.client()
    assert 'id="cancel"' not in client.get(f"/jobs/{ready}").text   # not logged in
    token = client.log_in()
    assert 'id="cancel"' in client.get(f"/jobs/{ready}").text
    assert client.post("/jobs/cancel", {"id": ready}).status == 403   # no CSRF token
    assert queue_store.get(ready)["status"] == "ready"

    answer = client.post("/jobs/cancel", {"csrf": token, "id": ready})
    assert answer.status == 303
    assert answer.headers["location"] == f"/jobs/{ready}"
    page = client.get(answer.headers["location"]).text
    assert f"Job {ready} cancelled: it will not run." in page
    assert 'state-cancelled">cancelled<' in page and 'id="cancel"' not in page
    assert 'id="retry"' in page and 'id="discard"' not in page   # retry it, never discard
    stopping = client.post("/jobs/cancel", {"csrf": token, "id": running})
    assert stopping.headers["location"] == f"/jobs/{running}"
    page = client.get(stopping.headers["location"]).text
    assert "its supervisor is stopping it" in page and 'id="stopping"' in page
    assert 'id="cancel"' not in page   # asked once: nothing more to ask
    finished = client.post("/jobs/cancel", {"csrf": token, "id": ready})
    assert finished.headers["location"] == f"/jobs/{ready}"
    assert "had already finished" in client.get(finished.headers["location"]).text
    assert client.post("/jobs/cancel", {"csrf": token, "id": 987654321}).status == 404
    assert client.post("/jobs/cancel", {"csrf": token, "id": "7; DROP"}).status == 400
    assert [queue_store.get(i)["status"] for i in (ready, running, other)] == [
        "cancelled", "reserved", "ready"]
    assert queue_store.get(running)["cancel_requested_at"] is not None
    actions = [event for event in map(json.loads, process.stderr().splitlines())
               if event["event"] == catalogued("dashboard_action")]
    assert [(e["action"], e["job"], e["outcome"]) for e in actions] == [
        ("cancel", ready, "cancelled"), ("cancel", running, "stopping"),
        ("cancel", ready, "finished")]


def test_the_cancelled_state_and_the_limits_table_show_everywhere(dashboard, queue_store):
    rule = LimitRule("report.build", concurrency=3)
    queue_store.publish_limits([rule], ["report.build"])
    limited = [queue_store.enqueue(new_job("report.build", {"n": n}, concurrency_key=HOSTILE))
               for n in range(3)]
    claimed, _ = queue_store.claim_limited(["default"], "dashboard-test:1", 60, 1, None,
                                           {"report.build": rule})
    assert [job.id for job in claimed] == limited[:1]
    cancelled = enqueue(queue_store, queue="mail")
    queue_store.cancel([cancelled])
    process = dashboard()
    client = process.client()
    answer = client.get("/api/overview")
    assert answer.status == 200, (answer.status, answer.text, process.stderr())
    overview = answer.json()
    assert {q["queue"]: q["cancelled"] for q in overview["queues"]} == {"default": 0, "mail": 1}
    assert overview["limits"] == [{"type": "report.build", "key": HOSTILE, "running": 1,
                                   "limit": 3, "rate": None, "waiting": 2}]
    page = client.get("/").text
    assert "<th>Cancelled</th>" in page and "<h2>Limits</h2>" in page
    assert HOSTILE not in page and "&lt;script&gt;alert(" in page   # the key, escaped
    assert "<td>Cancelled</td>" not in page
    listed = client.get("/jobs", status="cancelled").text
    assert f'href="/jobs/{cancelled}"' in listed and f'href="/jobs/{limited[1]}"' not in listed
    assert '<option value="cancelled"' in listed
    assert "<th>Cancelled</th>" in client.get("/queues").text
    job_page = client.get(f"/jobs/{cancelled}").text
    assert 'state-cancelled">cancelled<' in job_page


def test_bulk_action_on_everything_matching_goes_in_bounded_batches(dashboard, queue_store, db):
    queue_store.enqueue_many([new_job("mail.send", {}, queue="bulk") for _ in range(620)])
    db.execute("UPDATE prefork_jobs SET status = 'dead', finished_at = created_at"
               " WHERE queue = 'bulk'")
    other = make_dead(queue_store, queue="other")
    client = dashboard(password=PASSWORD).client()
    token = client.log_in()
    first = client.post("/api/dead/batch", {"csrf": token, "action": "retry", "queue": "bulk"})
    assert first.status == 200, first.text
    assert first.json()["processed"] == 500 and not first.json()["finished"]
    # Interrupted here: exactly one batch was done.
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'bulk' AND status = 'dead'") == 120
    second = client.post("/api/dead/batch", {"csrf": token, "action": "retry", "queue": "bulk",
                                             "after": first.json()["next_after"]}).json()
    assert second["processed"] == 120 and second["finished"]
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE status = 'dead'") == 1
    assert queue_store.get(other)["status"] == "dead"
    assert client.post("/api/dead/batch", {"csrf": token, "action": "explode"}).status == 400


def test_cross_site_posts_are_refused_and_change_nothing(dashboard, queue_store):
    dead_id = make_dead(queue_store)
    client = dashboard(password=PASSWORD).client()
    token = client.log_in()
    refused = [
        client.post("/dead/retry", {"id": dead_id}),                           # no token
        client.post("/dead/retry", {"id": dead_id, "csrf": token[:-2] + "xx"}),  # wrong token
        client.post("/dead/retry", {"id": dead_id, "csrf": token}, origin="http://evil.example"),
        client.post("/dead/retry", {"id": dead_id, "csrf": token}, origin=None),  # no Origin/Referer
        client.post("/dead/retry", {"id": dead_id, "csrf": token}, origin="null"),
        client.post("/api/dead/batch", {"action": "retry", "csrf": token}, origin="http://evil.example"),
        client.post("/queues/pause", {"queue": "default", "csrf": ""}),
    ]
    assert [answer.status for answer in refused] == [403] * len(refused)
    client.cookie = None   # a token without the session it belongs to
    assert client.post("/dead/retry", {"id": dead_id, "csrf": token}).status == 403
    assert queue_store.get(dead_id)["status"] == "dead"
    assert all(not q.paused for q in queue_store.queue_overview())


def test_a_same_host_referer_stands_in_for_a_missing_origin(dashboard, queue_store):
    dead_id = make_dead(queue_store)
    process = dashboard(password=PASSWORD)
    client = process.client()
    token = client.log_in()
    answer = client.post("/dead/retry", {"id": dead_id, "csrf": token}, origin=None,
                         headers={"Referer": process.url + "/dead"})
    assert answer.status == 303 and queue_store.get(dead_id)["status"] == "ready"


# -- hostile data --------------------------------------------------------------------------------

def test_hostile_data_is_rendered_inert(dashboard, queue_store, db):
    job_id = make_dead(queue_store, key=HOSTILE, payload={"note": HOSTILE, HOSTILE: 1},
                       error=HOSTILE)
    # Queue names and types the API refuses can still be in the table (another producer).
    db.execute("UPDATE prefork_jobs SET queue = %s, job_type = %s, error_history = %s"
               " WHERE id = %s", (HOSTILE[:60], HOSTILE, '[{"attempt": 1, "at": "x", "error": '
                                  '"</script><script>alert(2)</script>"}]', job_id))
    client = dashboard(password=PASSWORD).client()
    client.log_in()
    for path in PAGES + (f"/jobs/{job_id}", "/dead?" + "queue=" + "%3Cscript%3E"):
        text = client.get(path).text
        assert "<script>alert" not in text and "<img src=x" not in text, path
        assert "onerror=alert" not in text or "&lt;img" in text, path
    assert "&lt;script&gt;alert(" in client.get(f"/jobs/{job_id}").text
    assert "&lt;/script&gt;&lt;script&gt;alert(2)" in client.get(f"/jobs/{job_id}").text
    api = client.get(f"/api/jobs/{job_id}")
    assert api.headers["content-type"].startswith("application/json")
    assert api.json()["job_type"] == HOSTILE   # data, as JSON: the page's script sets it as text


# -- privileges, start-up ---------------------------------------------------------------------------

def test_discard_without_delete_says_so_in_one_line(store, migrated):
    queue_store = store()
    dead_id = make_dead(queue_store)
    database = migrated.rsplit("/", 1)[1]
    conn = admin_connection()
    with conn.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'pq_dash'@'%' IDENTIFIED BY 'dash-pw'")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE ON `{database}`.* TO 'pq_dash'@'%'")
    try:
        worker_dsn = migrated.replace("mysql://root@", "mysql://pq_dash@")
        with DashboardProcess(worker_dsn, password=PASSWORD,
                              env={"PREFORK_QUEUE_DB_PASSWORD": "dash-pw"}) as process:
            client = process.client()
            token = client.log_in()
            answer = client.post("/dead/discard", {"csrf": token, "id": [dead_id]})
            assert answer.status == 403
            problem = re.search(r'id="problem">([^<]*)</p>', answer.text).group(1)
            assert "DELETE privilege" in problem and "\n" not in problem
            retried = client.post("/dead/retry", {"csrf": token, "id": [dead_id]})
            assert retried.status == 303   # the worker account's privileges suffice
        assert queue_store.get(dead_id)["status"] == "ready"
    finally:
        with conn.cursor() as cursor:
            cursor.execute("DROP USER IF EXISTS 'pq_dash'@'%'")
        conn.close()


def test_a_url_prefix_serves_every_page_and_link_under_it(dashboard, queue_store):
    job_id = make_dead(queue_store)
    process = dashboard("--dashboard-url-prefix", "/queue/", password=PASSWORD)
    assert process.prefix == "/queue"
    client = process.client()
    token = client.log_in()
    for path in PAGES:
        answer = client.get(path)
        assert answer.status == 200 and 'href="/queue/static/dashboard.css"' in answer.text
    assert client.post("/dead/retry", {"csrf": token, "id": [job_id]}).headers["location"] \
        .startswith("/queue/dead")
    assert "Path=/queue" in client.post("/logout", {"csrf": client.csrf()}).cookies[0]


def run_dashboard(dsn, *args, **env):
    return subprocess.run([*DASHBOARD_COMMAND, *args],
                          capture_output=True, text=True, timeout=30, env=cli_env(dsn, **env))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_cleanly_even_amid_requests(sqlite_migrated, signum):
    """Whenever the stop comes (a keep-alive connection open, requests arriving) the
    dashboard exits 0, at once and without a traceback."""
    for _ in range(3):
        with DashboardProcess(sqlite_migrated) as process:
            host, port = process.address.rsplit(":", 1)
            idle = http.client.HTTPConnection(host, int(port), timeout=15)
            idle.request("GET", "/")
            assert idle.getresponse().read()   # the connection stays open, kept alive
            hammering = threading.Event()
            hammer = threading.Thread(target=_get_until_refused,
                                      args=(process.client(), hammering), daemon=True)
            hammer.start()
            assert hammering.wait(10), "no answer to the hammering client"
            process.process.send_signal(signum)
            assert process.process.wait(timeout=10) == 0
            hammer.join(10)
            idle.close()
            assert "Traceback" not in process.stderr()


def _get_until_refused(client, hammering):
    """GET the overview over and over (hammering set at the first answer) until refused."""
    try:
        while True:
            client.get("/api/overview")
            hammering.set()
    except (OSError, http.client.HTTPException):
        return


def test_bad_settings_are_one_line_and_a_wide_bind_warns(sqlite_migrated, tmp_path):
    dsn = sqlite_migrated
    loose = tmp_path / "password"
    loose.write_text("secret\n")
    loose.chmod(0o644)
    for args, env, words in (
            (["--dashboard-bind", "nowhere"], {}, "invalid dashboard_bind 'nowhere': expected HOST:PORT"),
            (["--dashboard-password-file", str(loose)], {}, "accessible to its group or others"),
            (["--dashboard-password", "x"], {}, "there is no --dashboard-password flag")):
        result = run_dashboard(dsn, *args, **env)
        assert result.returncode == 2, result
        assert words in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    missing = run_dashboard(f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    with DashboardProcess(dsn) as process:
        taken = run_dashboard(dsn, "--dashboard-bind", process.address)
    assert taken.returncode == 2 and "Traceback" not in taken.stderr
    assert taken.stderr.startswith(f"prefork-queue: error: cannot listen on {process.address}")
    wide = subprocess.Popen([*DASHBOARD_COMMAND,
                             "--dashboard-bind", "0.0.0.0:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(dsn))
    try:
        assert "dashboard serving on" in wide.stdout.readline()
    finally:
        wide.terminate()
        _, err = wide.communicate(timeout=10)
    assert "warning: the dashboard listens on 0.0.0.0" in err
    assert process.process.returncode == 0 and wide.returncode == 0


def test_the_wsgi_factory_honours_the_script_name_a_server_sets(make_sqlite_config):
    """Under gunicorn behind a proxy at /ops/queue (SCRIPT_NAME set by the server), every
    link names the prefix."""
    app = create_app(make_sqlite_config())
    environ = {"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/ops/queue", "PATH_INFO": "/jobs",
               "QUERY_STRING": "queue=mail"}
    wsgiref.util.setup_testing_defaults(environ)
    answers = []
    body = b"".join(app(environ, lambda status, headers: answers.append((status, headers))))
    status, headers = answers[0]
    assert status == "200 OK" and ("X-Frame-Options", "DENY") in headers
    assert b'href="/ops/queue/static/dashboard.css"' in body
    assert b'action="/ops/queue/jobs"' in body


def test_the_session_cookie_is_secure_when_the_server_says_https(make_sqlite_config):
    """wsgi.url_scheme is the WSGI server's word (gunicorn sets it from X-Forwarded-Proto
    for --forwarded-allow-ips only); the header alone, from anyone, changes nothing."""
    app = create_app(make_sqlite_config(dashboard_password=PASSWORD,
                                        dashboard_allowed_hosts="queue.example"))

    def log_in(scheme, **headers):
        form = urlencode({"password": PASSWORD}).encode()
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/login", "wsgi.url_scheme": scheme,
                   "HTTP_HOST": "queue.example", "HTTP_ORIGIN": f"{scheme}://queue.example",
                   "CONTENT_TYPE": "application/x-www-form-urlencoded",
                   "CONTENT_LENGTH": str(len(form)), "wsgi.input": io.BytesIO(form), **headers}
        wsgiref.util.setup_testing_defaults(environ)
        answers = []
        app(environ, lambda status, headers: answers.append((status, dict(headers))))
        status, sent = answers[0]
        assert status.startswith("303"), status
        return sent["Set-Cookie"]

    assert "; Secure" in log_in("https")
    assert "Secure" not in log_in("http", HTTP_X_FORWARDED_PROTO="https")


def test_the_speed_script_times_every_page_of_a_running_dashboard(sqlite_migrated, make_sqlite_config):
    store = SQLiteStore(make_sqlite_config())
    try:
        make_dead(store, key="order-123456")
        enqueue(store, key="order-1")
    finally:
        store.close()
    with DashboardProcess(sqlite_migrated) as process:
        result = subprocess.run([sys.executable, "-m", "prefork.dashboard.speed", process.url,
                                 "--calls", "3"], capture_output=True, text=True, timeout=60,
                                env=cli_env())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("slowest p95:") and len(lines) > 30
    assert any(line.startswith("/jobs?key=order-1 ") for line in lines)
