"""Command jobs ([command:TYPE] sections): the sections as read from a config file, and
real programs run by a real supervisor's workers against real MariaDB. How a template
is filled is tested in tests/fast/test_command_placeholders.py."""
import itertools
import json
import random
import shlex
import sys

import psutil
import pymysql
import pytest
from conftest import APPS, job_row, wait_until
from harness import SupervisorProcess, wait_gone

from prefork import config as config_module, registry
from prefork.errors import UserError
from prefork.jobs import new_job
from prefork import schedules
from prefork.worker import command_process, commands, output_lines

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
    (f"argv = {PROBE_ARGV}\nallow_option_values = yes\n",
     "allow_option_values must be true or false, got 'yes'"),
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
    assert not probe.allow_option_values
    assert spec(tmp_path, f"argv = {PROBE_ARGV}\nallow_option_values = True\n").allow_option_values


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
            f"[command:shell]\nargv = /bin/sh -c {{script}}\ntimeout = {timeout}\n\n"
            "[command:shell_untimed]\nargv = /bin/sh -c {script}\n\n"
            "[command:sort]\nargv = /usr/bin/sort {file}\n\n"
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
    assert len(chatter) == output_lines.MAX_LINES
    cut = [e for e in chatter if e.get("truncated")]
    assert len(cut) == 1 and cut[0]["line"] == "x" * output_lines.MAX_LINE_BYTES
    dropped = sup.wait_event("command_output_truncated", job_id=chatty)[0]
    assert dropped["dropped_lines"] == 2003 - output_lines.MAX_LINES
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


# -- nothing of a command's process group outlives it ----------------------------------

@pytest.fixture
def marked_sleeps():
    """Unique `sleep 300.N` arguments to find a command's left-over children by; any
    still running at the end are killed."""
    markers = []

    def new_marker():
        markers.append(f"300.{random.randrange(10**9)}")
        return markers[-1]

    yield new_marker
    for process in sleeping(markers):
        process.kill()


def sleeping(markers):
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if len(cmdline) == 2 and cmdline[0] == "sleep" and cmdline[1] in markers:
            found.append(process)
    return found


def guards_of(job_id):
    return [process for process in psutil.process_iter(["cmdline"])
            if f"command guard job {job_id} " in " ".join(process.info["cmdline"] or [])]


def assert_group_gone(job_id, marker, shell_record):
    assert shell_record.exists()      # the script ran, so its sleep was started
    wait_until(lambda: not sleeping([marker]), timeout=10, message=f"sleep {marker} to end")
    wait_until(lambda: not guards_of(job_id), timeout=10, message="the guard to end")


def test_what_a_command_leaves_running_is_killed_when_it_exits(supervisor, enqueue, clean_db,
                                                                  marked_sleeps, tmp_path):
    marker, record = marked_sleeps(), tmp_path / "started"
    job_id, _ = enqueue("ok", job_type="shell",
                        script=f"sleep {marker} & echo $! > {record}; echo x")
    supervisor()
    assert settled(clean_db, job_id, "done")["attempts"] == 1
    assert_group_gone(job_id, marker, record)


def test_nothing_is_left_after_a_soft_timeout(supervisor, enqueue, clean_db, marked_sleeps,
                                              tmp_path):
    marker, record = marked_sleeps(), tmp_path / "started"
    stubborn = f'(trap "" TERM; exec sleep {marker}) & touch {record}; exec sleep {marker}'
    job_id, _ = enqueue("ok", job_type="shell", max_attempts=1, script=stubborn)
    supervisor()
    assert settled(clean_db, job_id, "dead")["last_error"] == "soft timeout after 2s"
    assert_group_gone(job_id, marker, record)


def test_nothing_is_left_when_the_worker_dies_at_the_hard_timeout(supervisor, enqueue,
                                                                    clean_db, marked_sleeps,
                                                                    tmp_path):
    marker, record = marked_sleeps(), tmp_path / "started"
    job_id, _ = enqueue("ok", job_type="shell_untimed", max_attempts=1,
                        script=f"sleep {marker} & touch {record}; exec sleep {marker}")
    sup = supervisor()
    sup.wait_event("worker_exited", reason="hard timeout after 3s", timeout=20)
    assert settled(clean_db, job_id, "dead")["last_error"] == "worker died: hard timeout after 3s"
    assert_group_gone(job_id, marker, record)


# -- a placeholder value cannot become an option -----------------------------------------

def test_a_value_that_would_be_an_option_sends_the_job_to_dead_unrun(supervisor, enqueue,
                                                                     clean_db, tmp_path):
    pwned = tmp_path / "PWNED"
    job_id, _ = enqueue("ok", job_type="sort", file=f"--output={pwned}")
    sup = supervisor()
    row = settled(clean_db, job_id, "dead")
    assert (row["attempts"], row["last_error"]) == (1, commands.option_refusal("file"))
    assert not pwned.exists()
    assert not [e for e in sup.events("command_started") if e["job_id"] == job_id]
