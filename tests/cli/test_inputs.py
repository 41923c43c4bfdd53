"""Inputs that used to slip through validation (issue 11, items 6, 14, 15, 16), refused
on both backends through the real CLI and prefork.enqueue, with the tables untouched;
and a payload too deep to read, already in the table, dead at once under `work --once`.
"""
import json

import pytest
from cli_checks import assert_refused
from conftest import run_cli

import prefork
from prefork.errors import UserError
from prefork.jobs import MAX_PAYLOAD_DEPTH, TOO_DEEP

FILE_LINES = 1500
BAD_LINE = 1201     # past the first chunk of 1,000 that used to be committed on its own


def table_state(db):
    """What a refused command must leave as it was: the jobs and the paused queues."""
    return (db.scalar("SELECT COUNT(*) FROM prefork_jobs"),
            db.scalar("SELECT COALESCE(MAX(id), 0) FROM prefork_jobs"),
            db.scalar("SELECT COUNT(*) FROM prefork_queue_states"))


def enqueued_id(dsn, *args):
    result = run_cli("enqueue", *args, dsn=dsn)
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


def nested(depth):
    """A JSON object `depth` levels deep: {"a": {"a": ... {} ...}}."""
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def nested_dict(depth):
    """The same as a dict, built without recursion."""
    top = inner = {}
    for _ in range(depth - 1):
        inner["a"] = inner = {}
    return top


# --- item 6: a jobs file is checked whole before the first write --------------------

# Each is valid JSON that used to pass the line's checks and fail only at insert
# (or raise a traceback): a lone surrogate, a control character, a nesting too deep.
LATE_BAD_LINES = {
    "surrogate in key": (b'{"type": "noop", "key": "bad-\\ud800"}', "not valid Unicode"),
    "surrogate in payload": (b'{"type": "noop", "payload": {"s": "\\udc80"}}',
                             "not valid Unicode"),
    "NUL in key": (b'{"type": "noop", "key": "a\\u0000b"}', "control characters"),
    "not UTF-8": (b'{"type": "noop", "key": "caf\xe9"}', "not UTF-8"),
    "nested too deep": (b'{"type": "noop", "payload": ' + nested(1000).encode() + b"}",
                        f"more than {MAX_PAYLOAD_DEPTH} levels"),
    "trailing newline in queue": (b'{"type": "noop", "queue": "default\\n"}', "queue name"),
}


def jobs_file(tmp_path, bad_line=None):
    """FILE_LINES good lines, line BAD_LINE replaced by `bad_line` when given."""
    lines = [json.dumps({"type": "noop", "key": f"file-{n}", "payload": {"n": n}}).encode()
             for n in range(1, FILE_LINES + 1)]
    if bad_line is not None:
        lines[BAD_LINE - 1] = bad_line
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("kind", sorted(LATE_BAD_LINES))
def test_a_bad_line_late_in_a_big_file_writes_nothing(db, queue_dsn, tmp_path, kind):
    enqueued_id(queue_dsn, "noop", "--key", "already-there")
    before = table_state(db)
    bad_line, words = LATE_BAD_LINES[kind]
    result = run_cli("enqueue", "--file", str(jobs_file(tmp_path, bad_line)), dsn=queue_dsn)
    assert_refused(result, f"jobs.jsonl:{BAD_LINE}:", words)
    assert table_state(db) == before


def test_a_big_file_of_good_lines_is_enqueued_whole(db, queue_dsn, tmp_path):
    result = run_cli("enqueue", "--file", str(jobs_file(tmp_path)), dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"enqueued {FILE_LINES} new jobs (0 already present)"
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == FILE_LINES


# --- item 14: no trailing newline in a queue name or a job type ----------------------

def test_a_queue_or_type_ending_in_a_newline_is_refused(db, queue_dsn):
    before = table_state(db)
    assert_refused(run_cli("enqueue", "noop", "--queue", "default\n", dsn=queue_dsn),
                   "queue name")
    assert_refused(run_cli("enqueue", "noop\n", dsn=queue_dsn), "job type")
    assert_refused(run_cli("pause", "default\n", dsn=queue_dsn), "queue name")
    conn = db.app_connection()
    try:
        with pytest.raises(UserError, match="queue name"):
            prefork.enqueue(conn, "noop", queue="default\n")
        with pytest.raises(UserError, match="job type"):
            prefork.enqueue(conn, "noop\n")
    finally:
        conn.close()
    assert table_state(db) == before
    with pytest.raises(ValueError, match="job type"):
        prefork.handler("noop\n")


# --- items 15 and 16: keys both backends store and compare alike ---------------------

@pytest.mark.parametrize("key,words", [
    ("invoice-7   ", "whitespace"),
    (" invoice-7", "whitespace"),
    ("invoice\x1b7", "control characters"),     # C0 (ESC)
    ("invoice\x857", "control characters"),     # C1 (NEL)
    ("invoice\x7f7", "control characters"),     # DEL
])
def test_a_key_that_would_compare_or_run_differently_is_refused(db, queue_dsn, key, words):
    first = enqueued_id(queue_dsn, "noop", "--key", "invoice-7")
    before = table_state(db)
    refused = run_cli("enqueue", "noop", "--key", key, dsn=queue_dsn)
    assert_refused(refused, "idempotency key", words)
    assert table_state(db) == before
    assert enqueued_id(queue_dsn, "noop", "--key", "invoice-7") == first
    assert enqueued_id(queue_dsn, "noop", "--key", "invoice-8") != first
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 2


def test_prefork_enqueue_refuses_a_nul_in_a_key(db):
    conn = db.app_connection()
    try:
        with pytest.raises(UserError, match="control characters"):
            prefork.enqueue(conn, "noop", key="a\x00b")
    finally:
        conn.close()
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 0


# --- item 16: nesting ------------------------------------------------------------------

def test_a_payload_nested_too_deep_is_refused_in_one_line(db, queue_dsn):
    before = table_state(db)
    for payload in (nested(MAX_PAYLOAD_DEPTH + 1), nested(1000), "[" * 50_000 + "]" * 50_000):
        assert_refused(run_cli("enqueue", "noop", payload, dsn=queue_dsn),
                       TOO_DEEP, f"more than {MAX_PAYLOAD_DEPTH} levels")
    conn = db.app_connection()
    try:
        with pytest.raises(UserError, match=TOO_DEEP):
            prefork.enqueue(conn, "noop", nested_dict(1000))
    finally:
        conn.close()
    assert table_state(db) == before
    deepest = enqueued_id(queue_dsn, "noop", nested(MAX_PAYLOAD_DEPTH))
    assert db.row(deepest)["payload"] == nested(MAX_PAYLOAD_DEPTH)


def test_a_stored_payload_too_deep_to_read_is_dead_at_once(db, queue_dsn):
    job_id = enqueued_id(queue_dsn, "noop", "--key", "deep")
    db.execute("UPDATE prefork_jobs SET payload = %s WHERE id = %s", (nested(5000), job_id))
    result = run_cli("work", "--app", "ledger_app", "--once", dsn=queue_dsn)
    assert result.returncode == 0, result.stderr
    row = db.row(job_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("dead", 1, TOO_DEEP)
    assert "RecursionError" not in result.stderr
