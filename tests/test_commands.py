"""Command jobs ([command:TYPE] sections): the sections as read from a config file, and
real programs run by a real supervisor's workers against real MariaDB. How a template
is filled is tested in tests/fast/test_command_placeholders.py."""
import itertools
import json
import shlex
import sys

import pymysql
import pytest
from conftest import APPS, job_row, wait_until
from harness import SupervisorProcess, wait_gone

from prefork import config as config_module, registry
from prefork.errors import UserError
from prefork.jobs import new_job
from prefork.observers import schedules
from prefork.worker import command_process, commands

PROBE = APPS / "command_probe.py"
PYTHON = shlex.quote(sys.executable)
PROBE_ARGV = f"{PYTHON} {shlex.quote(str(PROBE))} {{mode}} {{record}}"
NASTY = "a b; $(touch /tmp/pwned) `id` 'q\" * \\ | && {label} ~ $HOME\ttab"


def load_commands(tmp_path, sections):
    path = tmp_path / "commands.conf"
    path.write_text(sections)
    return commands.build(config_module.load({}, path=str(path), environ={}))


def spec(tmp_path, body, job_type="probe"):
    return load_commands(tmp_path, f"[command:{job_type}]\n{body}")[job_type]


# -- the [command:TYPE] section ---------------------------------------------------------

@pytest.mark.parametrize("body, complaint", [
    ("argv = \n", "argv is required"),
    ("timeout = 3\n", "argv is required"),
    (f"argv = {PROBE_ARGV}\nshell = yes\n", "unknown key 'shell'"),
    ("argv = {program} --help\n", "the program (first argv element) cannot be a placeholder"),
    (f"argv = {PROBE_ARGV} 'unbalanced\n", "argv cannot be split"),
    (f"argv = {PROBE_ARGV} {{oops\n", "stray '{'"),
    (f"argv = {PROBE_ARGV} {{a.b}}\n", "stray '{'"),
    ("argv = no-such-program-anywhere x\n", "not found in PATH"),
    ("argv = ./not/here x\n", "is not an executable file"),
    (f"argv = {PROBE_ARGV}\ncwd = /no/such/dir\n", "is not a directory"),
    (f"argv = {PROBE_ARGV}\ntimeout = 0\n", "timeout must be"),
    (f"argv = {PROBE_ARGV}\ntimeout = soon\n", "timeout must be"),
    (f"argv = {PROBE_ARGV}\nenv = JUSTANAME\n", "env entries are NAME=VALUE"),
    (f"argv = {PROBE_ARGV}\nenv = PREFORK_QUEUE_DSN=x\n", "env cannot set PREFORK_QUEUE_DSN"),
])
def test_a_bad_command_section_is_a_one_line_error_naming_it(tmp_path, body, complaint):
    with pytest.raises(UserError) as caught:
        spec(tmp_path, body, job_type="bad")
    message = str(caught.value)
    assert complaint in message and "[command:bad]" in message and "\n" not in message


def test_env_timeout_and_cwd_are_read(tmp_path):
    probe = spec(tmp_path, f"argv = {PROBE_ARGV}\ntimeout = 2.5\ncwd = {tmp_path}\n"
                           "env = APP_ENV=production 'GREETING=hello world'\n")
    assert (probe.timeout, probe.cwd) == (2.5, str(tmp_path))
    assert probe.env == (("APP_ENV", "production"), ("GREETING", "hello world"))


@pytest.mark.parametrize("returncode, text", [
    (1, "command exited 1"), (3, "command exited 3"),
    (75, "command exited 75 (temporary failure)"),
    (-9, "command killed by SIGKILL"), (-15, "command killed by SIGTERM"),
])
def test_exit_statuses_are_described_by_code_or_signal(returncode, text):
    assert command_process.describe_status(returncode) == text


# -- real programs under a real supervisor ---------------------------------------------

def command_config(timeout=2, extra=""):
    return ("[prefork-queue]\nworkers = 4\nretry_base = 0.05\nretry_cap = 0.2\n"
            "hard_timeout = 3\n\n"
            f"[command:probe]\nargv = {PROBE_ARGV} --label={{label}} fixed 'two words'\n"
            f"timeout = {timeout}\n\n"
            f"[command:probe_untimed]\nargv = {PROBE_ARGV}\n{extra}")


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    started = []

    def start(config_text=None):
        sup = SupervisorProcess(tmp_path, migrated, "--log-format", "json",
                                config_text=config_text or command_config())
        started.append(sup)
        sup.wait_event("worker_ready", count=4)
        return sup

    yield start
    for sup in started:
        sup.kill_all()


@pytest.fixture
def enqueue(store, tmp_path):
    s = store()
    numbers = itertools.count()

    def add(mode, job_type="probe", max_attempts=5, **payload):
        record = tmp_path / f"record-{mode}-{next(numbers)}.json"
        payload = {"mode": mode, "record": str(record), "label": "x", **payload}
        return s.enqueue(new_job(job_type, payload, max_attempts=max_attempts)), record
    return add


def settled(conn, job_id, status):
    def check():
        row = job_row(conn, job_id)
        return row if row["status"] == status else None
    return wait_until(check, timeout=20, message=f"job {job_id} {status}")


def test_exit_codes_done_tempfail_retried_failure_and_signal(supervisor, enqueue, clean_db):
    ok, _ = enqueue("ok")
    tempfail, _ = enqueue("tempfail")
    fail_once, _ = enqueue("fail", max_attempts=1)
    fail_twice, _ = enqueue("fail", max_attempts=2)
    killed, _ = enqueue("selfkill", max_attempts=1)
    supervisor()
    assert settled(clean_db, ok, "done")["attempts"] == 1
    assert settled(clean_db, tempfail, "done")["attempts"] == 2
    row = settled(clean_db, fail_once, "dead")
    assert (row["attempts"], row["last_error"]) == (1, "command exited 1")
    row = settled(clean_db, fail_twice, "dead")   # another code is a failure, retried
    assert (row["attempts"], row["last_error"]) == (2, "command exited 1")
    row = settled(clean_db, killed, "dead")
    assert row["last_error"] == "command killed by SIGKILL"


def test_a_placeholder_value_arrives_as_one_argument_unchanged(supervisor, enqueue,
                                                                clean_db):
    job_id, record = enqueue("ok", label=NASTY)
    unfit, unfit_record = enqueue("ok", label=None)
    supervisor()
    settled(clean_db, job_id, "done")
    seen = json.loads(record.read_text())
    assert seen["args"] == [f"--label={NASTY}", "fixed", "two words"]
    assert seen["job_id"] == str(job_id)
    assert seen["leaked"] == []       # PREFORK_QUEUE_* (the DSN, a password) stay ours
    row = settled(clean_db, unfit, "dead")
    assert row["last_error"] == ("command placeholder {label}: the value must be a string "
                                 "(without NUL), a number or a boolean")
    assert not unfit_record.exists()


def test_a_command_is_killed_at_its_timeout(supervisor, enqueue, clean_db):
    timed, timed_record = enqueue("hang", max_attempts=1)
    sup = supervisor()
    row = settled(clean_db, timed, "dead")
    assert row["last_error"] == "soft timeout after 2s"
    wait_gone([json.loads(timed_record.read_text())["pid"]], timeout=5)
    assert sup.events("command_stopping")[0]["job_id"] == timed


def test_a_command_dies_with_a_worker_killed_at_the_hard_timeout(supervisor, enqueue,
                                                                  clean_db):
    job_id, record = enqueue("hang", job_type="probe_untimed", max_attempts=1)
    sup = supervisor()
    sup.wait_event("worker_exited", reason="hard timeout after 3s", timeout=20)
    assert settled(clean_db, job_id, "dead")["last_error"] == "worker died: hard timeout after 3s"
    wait_gone([json.loads(record.read_text())["pid"]], timeout=5)


def all_text_in_jobs_table(conn):
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("SELECT * FROM prefork_jobs")
        return " ".join(str(value) for row in cursor.fetchall() for value in row.values())


def test_output_goes_to_the_log_line_by_line_and_never_to_the_jobs_table(supervisor, enqueue,
                                                                         clean_db):
    quiet, _ = enqueue("ok")
    chatty, _ = enqueue("chatter")
    failing, _ = enqueue("fail", max_attempts=1)
    sup = supervisor()
    for job_id, status in ((quiet, "done"), (chatty, "done"), (failing, "dead")):
        settled(clean_db, job_id, status)
    lines = {(e["stream"], e["line"].split(" pid ")[0])
             for e in sup.events("command_output") if e["job_id"] == quiet}
    assert lines == {("stdout", "probe-stdout ok"), ("stderr", "probe-stderr ok")}
    chatter = [e for e in sup.events("command_output") if e["job_id"] == chatty]
    assert len(chatter) == command_process.MAX_LINES
    cut = [e for e in chatter if e.get("truncated")]
    assert len(cut) == 1 and cut[0]["line"] == "x" * command_process.MAX_LINE_BYTES
    dropped = sup.wait_event("command_output_truncated", job_id=chatty)[0]
    assert dropped["dropped_lines"] == 2003 - command_process.MAX_LINES
    stored = all_text_in_jobs_table(clean_db)
    assert "probe-std" not in stored and "chatter line" not in stored and "xxxx" not in stored


def test_a_schedule_of_a_command_type_must_fill_its_placeholders_at_start(tmp_path):
    path = tmp_path / "both.conf"
    path.write_text(f"[command:probe]\nargv = {PROBE_ARGV}\n\n"
                    '[schedule:nightly]\ntype = probe\ncron = 0 3 * * *\npayload = {"mode": "ok"}\n')
    with pytest.raises(UserError) as caught:
        schedules.validate(config_module.load({}, path=str(path), environ={}))
    assert "[schedule:nightly]: payload does not fit [command:probe]: command placeholder " \
           "{record}: no such key in the payload" in str(caught.value)
    assert registry.lookup("probe") is None     # a refused config registers nothing
