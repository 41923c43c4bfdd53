"""A job's page over real HTTP (issues 28 and 29), a real `prefork-queue dashboard` on
MariaDB and on SQLite, the jobs run by the real `work` command: a done job's result
(its redacted keys masked, markup inert), the tracebacks of the last failed attempts,
the attempts limit that applied, every time as ISO 8601 UTC with its zone, and the
fields under the names a reader says rather than their columns'."""
import html
import re

import pytest
from conftest import run_cli
from dashboard_helpers import assert_secured
from dashboard_helpers import dashboard, queue_store  # noqa: F401  (pytest fixtures)

from prefork.jobs import new_job

HOSTILE = "<script>alert(1)</script>"
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


@pytest.fixture
def worked(queue_dsn, queue_store):
    """Jobs run to their ends by `work`: {name: job id}."""
    ids = {"answer": queue_store.enqueue(new_job("results.echo", {"value": {
               "answer": 42, "api_key": "k-123", "note": HOSTILE}})),
           "nothing": queue_store.enqueue(new_job("results.nothing")),
           "capped": queue_store.enqueue(new_job("results.capped", max_attempts=5))}
    work = run_cli("work", "--app", "results_app", "--stop-when-empty", dsn=queue_dsn)
    assert work.returncode == 0, work.stderr
    return ids


def rows_of(page):
    """The job page's fields table: {label: value text}."""
    table = re.search(r'<table class="fields" id="fields">(.*?)</table>', page, re.S).group(1)
    return {html.unescape(label): html.unescape(value)
            for label, value in re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", table)}


def test_a_done_jobs_page_shows_its_result_redacted_and_inert(dashboard, worked):
    client = dashboard().client()
    answer = client.get(f"/jobs/{worked['answer']}")
    assert answer.status == 200
    assert_secured(answer)
    result = html.unescape(re.search(r'<pre id="result">(.*?)</pre>', answer.text, re.S)[1])
    assert '"answer": 42' in result and '"api_key": "[redacted]"' in result
    assert "<script>" not in answer.text and '"note": "<script>alert' in result   # escaped
    assert "k-123" not in answer.text
    assert ISO_UTC.search(re.search(r'<p id="result-kept">(.*?)</p>', answer.text)[1])
    nothing = client.get(f"/jobs/{worked['nothing']}").text
    assert "No result: its handler returned nothing" in nothing
    api = client.get(f"/api/jobs/{worked['answer']}").json()
    assert '"answer": 42' in api["result"] and ISO_UTC.fullmatch(api["result_expires_at"])
    assert api["tracebacks"] == []


def test_a_failed_jobs_page_shows_its_tracebacks_and_the_limit_that_applied(dashboard, worked):
    client = dashboard().client()
    page = client.get(f"/jobs/{worked['capped']}").text
    fields = rows_of(page)
    assert (fields["State"], fields["Attempts"], fields["Max attempts"]) == ("dead", "3", "3")
    assert fields["Type"] == "results.capped" and "Cancel requested at" in fields
    assert not {"job_type", "cancel_requested_at", "max_attempts"} & set(fields)
    for name in ("Enqueued", "Updated", "Finished", "Runs from"):
        assert ISO_UTC.fullmatch(fields[name]), (name, fields[name])
    kept = re.findall(r'<h3>Attempt (\d+), failed at (\S+) on \S+</h3>\s*'
                      r'<pre class="traceback">(.*?)</pre>', page, re.S)
    assert [attempt for attempt, _, _ in kept] == ["1", "2", "3"]
    for attempt, at, text in kept:
        assert ISO_UTC.fullmatch(at)
        assert html.unescape(text).splitlines()[-1] == \
            f"ConnectionError: attempt {attempt}: mysql://app:***@db/x refused"
    history = re.findall(r"<tr><td>\d+</td><td>(.*?)</td>", page)
    assert len(history) == 3 and all(ISO_UTC.fullmatch(at) for at in history)
    api = client.get(f"/api/jobs/{worked['capped']}").json()
    assert [entry["attempt"] for entry in api["tracebacks"]] == [1, 2, 3]
    assert api["max_attempts"] == 3 and api["result"] is None
    assert ISO_UTC.fullmatch(api["finished_at"])
