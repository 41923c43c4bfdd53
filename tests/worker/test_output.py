"""A worker child's own stdout and stderr (a handler's print(), a write to the
descriptor, C's stdio, a program it starts) under a real supervisor, in both log
formats: each line is a job_output event naming its job, so that every line of a
JSON log stays JSON; a last line without a newline appears, also when its child exits
right after the job; lines are cut and counted as a command job's are."""
import json
import re

import pytest
from conftest import wait_until
from harness import supervisor_starter

from prefork.jobs import new_job
from prefork.worker import output_lines

BASE_ARGS = ("--app", "output_app", "--workers", "1", "--poll-interval", "0.2")
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ (?P<level>[A-Z]+) +\[(?P<pid>\d+)\] (?P<event>\w+)"
                       r"(?: (?P<fields>.*))?$")
TEXT_OUTPUT = re.compile(r"^job_id=(?P<job_id>\d+) type=(?P<type>\S+) stream=(?P<stream>\w+) "
                         r"line=(?P<line>.*)$")


@pytest.fixture
def supervisor(tmp_path, sqlite_migrated):
    """start(*args): a supervisor whose output is buffered as in production (C's stdio
    too, which PYTHONUNBUFFERED would make unbuffered)."""
    with supervisor_starter(tmp_path, sqlite_migrated, *BASE_ARGS) as start:
        yield lambda *args: start(*args, env={"PYTHONUNBUFFERED": ""})


def expected_lines(job_id, tag):
    return {(job_id, "stdout", f"{tag} printed"), (job_id, "stderr", f"{tag} to stderr"),
            (job_id, "stdout", f"{tag} on descriptor 1"), (job_id, "stdout", f"{tag} from C"),
            (job_id, "stdout", f"{tag} from a program"), (job_id, "stderr", f"{tag} program err"),
            (job_id, "stdout", f"{tag} without newline")}


def json_output(log_text):
    """Every line of the log parsed as JSON (a raw line fails the test), and the
    (job_id, stream, line) of its job_output events."""
    events = [json.loads(line) for line in log_text.splitlines() if line]
    return events, [(e["job_id"], e["stream"], e["line"]) for e in events
                    if e["event"] == "job_output"]


def text_output(log_text):
    """Every line of the text log is an event's (or a many-line field's, indented); the
    (job_id, stream, line) of its job_output lines."""
    found = []
    for line in log_text.splitlines():
        if line.startswith("  "):
            continue
        match = TEXT_LINE.match(line)
        assert match, f"a raw line in the text log: {line!r}"
        if match["event"] == "job_output":
            fields = TEXT_OUTPUT.match(match["fields"])
            found.append((int(fields["job_id"]), fields["stream"], fields["line"]))
    return found


@pytest.mark.parametrize("mode", [(), ("--max-items", "1")], ids=["pool", "fork-per-job"])
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_what_a_handler_writes_is_logged_line_by_line_with_its_job(supervisor, sqlite_store,
                                                                   sqlite_db, log_format, mode):
    store = sqlite_store()
    printing = store.enqueue(new_job("output.print", {"tag": "alpha"}))
    failing = store.enqueue(new_job("output.fail", {"tag": "beta"}, max_attempts=1))
    sup = supervisor("--log-format", log_format, *mode)
    wait_until(lambda: sqlite_db.row(failing)["status"] == "dead"
               and sqlite_db.row(printing)["status"] == "done", timeout=30)
    want = expected_lines(printing, "alpha") | {(failing, "stdout", "beta before failing")}
    if log_format == "json":
        wait_until(lambda: set(json_output(sup.log_text())[1]) >= want, timeout=30,
                   message="the output lines")
        sup.stop()
        events, lines = json_output(sup.log_text())
        by_line = {(e["job_id"], e["stream"], e["line"]): e for e in events
                   if e["event"] == "job_output"}
        assert by_line[(printing, "stdout", "alpha printed")]["type"] == "output.print"
        workers = {e["pid"] for e in events if e["event"] == "worker_started"}
        assert {e["pid"] for e in by_line.values()} <= workers   # logged by the child
    else:
        wait_until(lambda: set(text_output(sup.log_text())) >= want, timeout=30,
                   message="the output lines")
        sup.stop()
        lines = text_output(sup.log_text())
    assert sorted(lines) == sorted(want)   # each line once: the log never reads itself back


def test_long_lines_are_cut_and_lines_past_the_limit_counted(supervisor, sqlite_store,
                                                            sqlite_db):
    store = sqlite_store()
    job_id = store.enqueue(new_job("output.flood", {"lines": output_lines.MAX_LINES - 1,
                                                    "after": 3}))
    sup = supervisor()
    wait_until(lambda: sqlite_db.row(job_id)["status"] == "done", timeout=30)
    dropped = sup.wait_event("job_output_truncated", job_id=job_id)[0]
    assert (dropped["dropped_lines"], dropped["max_lines"]) == (3, output_lines.MAX_LINES)
    logged = sup.events("job_output", job_id=job_id)
    assert len(logged) == output_lines.MAX_LINES
    assert [e["line"] for e in logged[:3]] == ["line 0", "line 1", "line 2"]
    cut = [e for e in logged if e.get("truncated")]
    assert [e["line"] for e in cut] == ["x" * output_lines.MAX_LINE_BYTES]


def test_capture_output_false_leaves_the_output_as_it_is(supervisor, sqlite_store, sqlite_db):
    store = sqlite_store()
    job_id = store.enqueue(new_job("output.print", {"tag": "gamma"}))
    sup = supervisor("--capture-output", "false")
    wait_until(lambda: sqlite_db.row(job_id)["status"] == "done", timeout=30)
    wait_until(lambda: "gamma on descriptor 1" in sup.log_text().splitlines(), timeout=30,
               message="the raw line")
    assert not sup.events("job_output")
