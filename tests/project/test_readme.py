"""The README's Quick start and the tutorial, run verbatim as a new user follows them,
so neither can drift. The README: the examples and its ten-line handler on SQLite.
The tutorial: the examples on SQLite, your own handlers on the same file, then the
MySQL steps against the local MariaDB (root without a password is the
administrator). How each block is run: tests/readme_walk.py."""
import os
import re
import sysconfig
import uuid

import pytest
from conftest import SERVER, admin_connection, wait_until
from readme_walk import Terminal, exported_names, steps, title_pattern, tutorial_steps

POLL_TIMEOUT = 60        # seconds a user would wait for a result before giving up
REPORT_ROW = '{"account": 7, "lines": []}'     # myapp/tasks.py's, in the MySQL steps

# What a user checks in a block's output (the marker's NAME): what the page says it shows.
README_CHECKS: dict = {}        # the README's blocks show their output verbatim
TUTORIAL_CHECKS = {
    "enqueue-examples": lambda out: out == "1\n2\n3\n4\n",
    "dead-job": lambda out: bool(re.search(r"^\s*3\s+default\s+fail-n-times\s+2\s", out, re.M)
                                 and '"status": "dead"' in out),
    "retried": lambda out: out == "retried 1 job\n",
    "mysql-report": lambda out: bool(re.search(r"workers 8/8 as of ", out)
                                     and re.search(r"^default\s+0\s+0\s+0\s+0\s+0\s+0\s+1\s", out, re.M)
                                     and f"report-7\t{REPORT_ROW}\n" in out),
}


def new_user_environment():
    """The caller's environment as a new user's shell has it: none of our variables, no
    PYTHONPATH, and `prefork-queue` (and `python3`) of the interpreter under test first."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("PREFORK_") and name != "PYTHONPATH"}
    env["PATH"] = os.pathsep.join([sysconfig.get_path("scripts"), env.get("PATH", "")])
    return env


@pytest.fixture
def mysql_values(mysql_server):
    """The values the README has the user set (`export DB_HOST=... DB=...`): a database and
    a worker account of this run's own, dropped afterwards."""
    suffix = uuid.uuid4().hex[:10]
    values = {"DB_HOST": SERVER["host"], "DB": f"pq_readme_{suffix}", "WORKER": f"pqr_{suffix}",
              "WORKER_HOST": "%"}
    yield values
    conn = admin_connection()
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{values['DB']}`")
            cursor.execute("DROP USER IF EXISTS %s@%s", (values["WORKER"], values["WORKER_HOST"]))
    finally:
        conn.close()


def shows(step, out, checks):
    """Whether `out` is what the page says the block prints."""
    return out == step.output if step.output is not None else checks[step.argument](out)


def check(step, out, checks):
    assert shows(step, out, checks), f"{step} printed:\n{out}"


def poll(terminal, step, checks):
    """Run the block again until it shows what the page says (a user repeating it)."""
    outputs = []

    def shows_it():
        outputs.append(terminal.run(step))
        return shows(step, outputs[-1], checks)
    try:
        wait_until(shows_it, timeout=POLL_TIMEOUT, interval=0.2, message=str(step))
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it printed last:\n{outputs[-1] if outputs else ''}") from None


def match_titles(terminal, step):
    """Every line of the sample `ps` output is the title of a process of the supervisor."""
    patterns = [title_pattern(line) for line in step.text.splitlines()]
    seen = []

    def all_shown():
        seen[:] = terminal.titles()
        return all(any(pattern.fullmatch(title) for title in seen) for pattern in patterns)
    try:
        wait_until(all_shown, timeout=POLL_TIMEOUT, message=f"{step}'s titles")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the titles were:\n" + "\n".join(seen)) from None


def write_file(terminal, step):
    path = terminal.cwd / step.argument
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(step.text + "\n")


def take_values(terminal, step, values):
    assert sorted(exported_names(step)) == sorted(values), \
        f"{step} sets {exported_names(step)}; the test sets {sorted(values)}"
    terminal.env.update(values)


def walk(terminal, found, checks, values=None):
    for step in found:
        if step.kind == "run":
            out = terminal.run(step)
            if step.argument or step.output is not None:
                check(step, out, checks)
        elif step.kind == "poll":
            poll(terminal, step, checks)
        elif step.kind == "background":
            terminal.start(step)
        elif step.kind == "ctrl-c":
            terminal.ctrl_c(step)
        elif step.kind == "titles":
            match_titles(terminal, step)
        elif step.kind == "file":
            write_file(terminal, step)
        elif step.kind == "values":
            assert values is not None, f"{step}: a values block where the test sets none"
            take_values(terminal, step, values)


def new_terminal(tmp_path):
    home = tmp_path / "newuser"
    home.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    return Terminal(home, new_user_environment(), state)


@pytest.mark.parametrize("walked,checks", [(steps, README_CHECKS), (tutorial_steps, TUTORIAL_CHECKS)],
                         ids=["readme", "tutorial"])
def test_every_walked_block_says_how_it_is_run(walked, checks):
    found = walked()   # an unmarked block or a marker without its block fails here
    assert found, "nothing to walk"
    named = {step.argument for step in found if step.kind in ("run", "poll") and step.argument}
    assert named == set(checks), "a readme-test NAME without a check, or a check no block uses"
    assert all(step.argument or step.output is not None for step in found if step.kind == "poll"), \
        "a poll block with nothing to wait for (a NAME or an output block)"
    assert [step.kind for step in found].count("ctrl-c") == \
        [step.kind for step in found].count("background"), "a supervisor the README never stops"
    assert all(step.text.strip() for step in found if step.kind != "ctrl-c"), "an empty block"


def test_a_new_user_follows_the_readme(tmp_path):
    terminal = new_terminal(tmp_path)
    try:
        walk(terminal, steps(), README_CHECKS)
    finally:
        terminal.cleanup()
    assert (terminal.cwd / "prefork-queue.db").stat().st_mode & 0o777 == 0o600


def test_a_new_user_follows_the_tutorial_on_sqlite_and_mysql(tmp_path, mysql_values):
    terminal = new_terminal(tmp_path)
    try:
        walk(terminal, tutorial_steps(), TUTORIAL_CHECKS, mysql_values)
    finally:
        terminal.cleanup()
    # What the tutorial says about the files of its first page.
    assert (terminal.cwd / "prefork-reports" / "report-4.json").is_file()
    assert (terminal.cwd / "prefork-queue.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("body,problem", [
    ("```sh\nprefork-queue status\n```\n", "a block without a readme-test marker"),
    ("<!-- readme-test: run -->\nprose\n", "the marker is not followed by a block"),
    ("<!-- readme-test: maybe -->\n```sh\nls\n```\n", "unknown readme-test kind 'maybe'"),
    ("<!-- readme-test: skip -->\n```sh\nsystemctl start x\n```\n", "skip needs an argument"),
    ("<!-- readme-test: background -->\n```sh\nprefork-queue\n```\n"
     "<!-- readme-test: output -->\n```\nx\n```\n", "an output block follows a run or poll block"),
    ("    prefork-queue status\n", "an indented code block"),
    ("<!-- readme-test: run -->\n```python\nprint(1)\n```\n", "a run block is a shell block"),
])
def test_a_block_that_would_dodge_the_walk_is_refused(tmp_path, body, problem):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Quick start\n\n{body}\n## Commands\n\n```sh\nnot checked\n```\n")
    with pytest.raises(AssertionError, match=re.escape(problem)):
        steps(readme)

