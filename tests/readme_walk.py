"""The README's Quick start and the tutorial's pages, read and run as a new user would
(tests/project/test_readme.py).

Each walked text is a list of steps: the README's Quick start section, and the
tutorial's pages in docs/tutorial/ that run on SQLite and MariaDB, in order, whole.
Each fenced block has an HTML comment just before it, invisible on GitHub and in the
built pages, that says how a new user uses it (`readme-test:` in the README,
`doc-test:` in the docs):

    <!-- readme-test: run [NAME] -->    a shell block, run once; it must exit 0 (and
                                        pass the test's check called NAME)
    <!-- readme-test: poll [NAME] -->   a shell block a user repeats until it shows
                                        the result: NAME's check, or the output block
    <!-- readme-test: output -->        what the block before it prints, verbatim
    <!-- readme-test: background -->   a long-running command (the supervisor in the
                                        foreground of a first terminal)
    <!-- readme-test: titles -->        sample `ps` output: the titles it must match
    <!-- readme-test: file PATH -->     a file the user writes, at PATH
    <!-- readme-test: values -->        `export NAME=value` lines the user edits; the
                                        test sets the same names to its own values
    <!-- readme-test: skip REASON -->   not run here, and why (e.g. systemctl)

and `<!-- readme-test: ctrl-c -->` alone on a line is the user pressing Ctrl-C in
the first terminal. Shell blocks run verbatim under `bash` with `set -euo
pipefail`, in one directory, and what a block exports is seen by the next, as
in a user's terminal.
"""
import os
import re
import shlex
import signal
import subprocess
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

import psutil
from conftest import wait_until
from harness import titles, wait_gone

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = "## Quick start"
# The tutorial's pages a new user walks in one directory, in this order (its last
# page, the Django task, needs a Django project: tests/contrib/test_django.py runs that).
TUTORIAL = [ROOT / "docs" / "tutorial" / name for name in
            ("first-jobs.md", "own-handlers.md", "mariadb.md")]
MARKER = re.compile(r"<!-- (?:readme|doc)-test: (\S+)(?: (.+?))? -->")
FENCE = "```"
KINDS = {"run", "poll", "output", "background", "titles", "file", "values", "skip", "ctrl-c"}
ARGUMENT_REQUIRED = {"file", "skip"}
SHELL_KINDS = {"run", "poll", "background"}     # their blocks are ```sh
COMMAND_TIMEOUT = 120            # seconds; one block on a slow, shared machine
STARTUP_TIMEOUT = 60
STOP_TIMEOUT = 90                # a drain waits for the running jobs (the tutorial's sleep)


@dataclass(frozen=True)
class Step:
    kind: str
    argument: str | None
    where: str                   # "README.md:12": the marker's file and line, for messages
    text: str = ""               # the block's content (none for ctrl-c)
    output: str | None = None    # what it prints, from the output block after it

    def __str__(self):
        return f"{self.where} ({self.kind}{' ' + self.argument if self.argument else ''})"


def section_lines(path, heading):
    """(line number, text) of the section under `heading`, up to the next `## `
    heading; the whole file when heading is None."""
    lines = path.read_text().splitlines()
    if heading is None:
        return list(enumerate(lines, 1))
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [(number + 1, lines[number]) for number in range(start, end)]


def tutorial_steps(pages=TUTORIAL):
    """The steps of the tutorial's walked pages, one after the other."""
    return [step for page in pages for step in steps(page, heading=None)]


def steps(path=README, heading=SECTION):
    """The section's steps in order; a block without a marker, a marker without its
    block or an unknown kind is an AssertionError naming the line."""
    found, lines, i = [], section_lines(path, heading), 0
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    while i < len(lines):
        number, text = lines[i]
        where = f"{name}:{number}"
        assert not text.startswith(FENCE), f"{where}: a block without a readme-test marker"
        assert not (text.startswith("    ") and not lines[i - 1][1].strip()), \
            f"{where}: an indented code block: fence it and mark it"
        marker = MARKER.fullmatch(text.strip())
        i += 1
        if not marker:
            continue
        kind, argument = marker.groups()
        assert kind in KINDS, f"{where}: unknown readme-test kind {kind!r}"
        assert argument or kind not in ARGUMENT_REQUIRED, f"{where}: {kind} needs an argument"
        if kind == "ctrl-c":
            found.append(Step(kind, argument, where))
            continue
        assert i < len(lines) and lines[i][1].startswith(FENCE), \
            f"{where}: the marker is not followed by a block"
        assert kind not in SHELL_KINDS or lines[i][1] == FENCE + "sh", \
            f"{where}: a {kind} block is a shell block (```sh)"
        close = next(j for j in range(i + 1, len(lines)) if lines[j][1] == FENCE)
        found.append(Step(kind, argument, where, "\n".join(text for _, text in lines[i + 1:close])))
        i = close + 1
        if kind == "output":
            found[-2:] = [_with_output(found[-2:])]
    return found


def _with_output(pair):
    """The run or poll step before an output block, expecting that output."""
    assert len(pair) == 2 and pair[0].kind in ("run", "poll") and pair[0].output is None, \
        f"{pair[-1]}: an output block follows a run or poll block"
    return replace(pair[0], output=pair[1].text + "\n")


def exported_names(step):
    """The names a `values` block sets; it may hold nothing but `export NAME=value` lines."""
    names = []
    for line in step.text.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "export" and all("=" in word for word in words[1:]), \
            f"{step}: only `export NAME=value` lines belong in a values block: {line!r}"
        names += [word.split("=", 1)[0] for word in words[1:]]
    return names


def title_pattern(sample_line):
    """A sample line of `ps -eo pid,args` as a pattern for a title: the pid dropped,
    every number free (ids, counts and ages differ from run to run)."""
    title = sample_line.strip().split(" ", 1)[1]
    return re.compile(re.sub(r"\d+", r"\\d+", re.escape(title)))


class Terminal:
    """A user's shell session in `cwd`: runs blocks, keeps their exports, and keeps
    one background command (the first terminal) that Ctrl-C stops."""

    def __init__(self, cwd, env, state_dir):
        self.cwd, self.env = cwd, dict(env)
        self.state = state_dir / "exported.env"
        self.background = None
        self.background_log = state_dir / "background.log"

    def _popen(self, script, **kwargs):
        # Its own session, as a terminal's: Ctrl-C and the clean-up reach the whole group.
        return subprocess.Popen(["bash", "-c", f"set -euo pipefail\n{script}"], cwd=self.cwd,
                                env=self.env, start_new_session=True, text=True, **kwargs)

    def run(self, step):
        """Run the block to its end; its stdout. Exit 0 is required."""
        proc = self._popen(f"{step.text}\nenv -0 > {shlex.quote(str(self.state))}",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            raise AssertionError(f"{step} still running after {COMMAND_TIMEOUT}s") from None
        assert proc.returncode == 0, f"{step} exited {proc.returncode}\n{step.text}\n" \
                                     f"stdout:\n{out}\nstderr:\n{err}"
        entries = self.state.read_bytes().decode().split("\0")
        self.env = dict(entry.split("=", 1) for entry in entries if "=" in entry)
        return out

    def start(self, step):
        """Start the block as a user does in a first terminal; return once its supervisor
        says that every worker is up (`workers N/N` in its title), as a user would see."""
        assert self.background is None, f"{step}: the first terminal is busy (no ctrl-c before)"
        with self.background_log.open("w") as log:
            self.background = self._popen(step.text, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: self._all_workers_up(step), timeout=STARTUP_TIMEOUT,
                   message=f"{step} to start its workers")

    def _all_workers_up(self, step):
        assert self.background.poll() is None, \
            f"{step} exited {self.background.returncode}:\n{self.background_log.read_text()}"
        return re.search(r"workers (\d+)/\1 ", self.master_title())

    def tree(self):
        """pids of the background command and everything under it."""
        try:
            root = psutil.Process(self.background.pid)
            return [root.pid] + [child.pid for child in root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def titles(self):
        return list(titles(self.tree()).values())

    def master_title(self):
        return next((title for title in self.titles() if title.startswith("prefork-queue master")), "")

    def ctrl_c(self, step):
        """Ctrl-C: SIGINT to the first terminal's foreground process group; it must drain
        and exit 0, leaving no process behind."""
        assert self.background is not None, f"{step}: nothing runs in the first terminal"
        pids = self.tree()
        os.killpg(self.background.pid, signal.SIGINT)
        try:
            code = self.background.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{step}: still running {STOP_TIMEOUT}s after Ctrl-C") from None
        self.background = None   # reaped: what is left, cleanup finds by its directory
        assert code == 0, f"{step}: exit {code} after Ctrl-C:\n{self.background_log.read_text()}"
        wait_gone(pids, timeout=30)

    def cleanup(self):
        """Kill whatever is left: the first terminal's process group, and any process
        still running in the directory (one a block left behind, or that left its group)."""
        if self.background is not None:
            self._kill(self.background)
        for proc in psutil.process_iter():
            with suppress(psutil.Error):
                if Path(proc.cwd()).is_relative_to(self.cwd):
                    proc.kill()

    @staticmethod
    def _kill(proc):
        """SIGKILL the group of `proc`, which must not have been reaped yet (so that its
        group id cannot belong to anyone else)."""
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
