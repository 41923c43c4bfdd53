"""Command jobs: [command:TYPE] sections of the config file declare a job type
that runs an external program (a PHP script, a shell tool...).

    [command:report.build]
    argv = php /srv/app/artisan report:build {account} --format={format}
    timeout = 600
    cwd = /srv/app
    env = APP_ENV=production LOG_CHANNEL=stderr

`argv` is split once, at load time, with shlex into a fixed argv. Each
`{name}` is filled from the job's payload inside the one element it stands
in: a value with spaces or shell metacharacters is still that one argument,
unchanged. No shell is involved, ever. The program (the first element) takes
no placeholder. `{{` and `}}` are literal braces.

Exit 0 is done; exit 75 (EX_TEMPFAIL) is a transient failure; any other exit
code or a signal is a failed attempt too. All of them are retried with
backoff until max_attempts, then dead; last_error names the code or the
signal ("command exited 3", "command killed by SIGKILL"). A payload that
cannot fill the placeholders is a permanent failure (dead at once).

stdout and stderr go to the worker's log line by line (command_output
events), cut at MAX_LINE_BYTES and MAX_LINES per job; they are never stored
in the jobs table.
"""
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Optional

from .. import registry
from ..errors import CommandFailed, RejectedJob, UserError
from ..logs import event
from ..process_signals import PARENT_ONLY_SIGNALS, preexec_die_with_parent

KEYS = ("argv", "timeout", "cwd", "env")
TEMPFAIL = 75                 # EX_TEMPFAIL from sysexits.h
KILL_GRACE = 5.0              # seconds between SIGTERM and SIGKILL at a timeout
MAX_LINE_BYTES = 1000         # longer output lines are cut
MAX_LINES = 500               # output lines logged per job; the rest are counted
DRAIN_AFTER_EXIT = 1.0        # seconds to read output a left-over grandchild still writes
READ_SIZE = 65536
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The supervisor's settings (the DB password!) stay ours; the job's are set per job.
OWN_ENV_PREFIXES = ("PREFORK_QUEUE_", "PREFORK_JOB_")
# One match per token of an argv element: {{, }}, {name}, or a stray brace.
TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Ignored by a worker child (the parent acts on them); an ignored signal stays
# ignored across exec, so the program gets them back at their default.


@dataclass(frozen=True)
class CommandSpec:
    job_type: str
    argv: tuple                 # one tuple of parts per element: ("text", s) or ("field", name)
    timeout: Optional[float]    # the job's soft timeout; None: the configured soft_timeout
    cwd: Optional[str]
    env: tuple                  # (name, value) pairs added to the inherited environment

    def placeholders(self):
        return sorted({value for element in self.argv for kind, value in element
                       if kind == "field"})


_configured = {}   # job type -> CommandSpec, the command types in force in this process


def section_error(config, kind, name, text):
    """A one-line config error about one named section."""
    where = f"config file {config.path!r}: " if config.path else ""
    return UserError(f"{where}[{kind}:{name}]: {text}")


# -- loading ---------------------------------------------------------------------

def build(config):
    """{job type: CommandSpec} from the [command:TYPE] sections; UserError on the first
    problem. Pure: nothing is registered (see install)."""
    specs = {}
    for job_type, keys in sorted(config.named("command").items()):
        def fail(text, job_type=job_type):
            return section_error(config, "command", job_type, text)
        specs[job_type] = _parse(job_type, keys, fail)
    return specs


def _parse(job_type, keys, fail):
    if not registry.JOB_TYPE_PATTERN.match(job_type):
        raise fail("invalid job type name: use 1-128 of A-Z a-z 0-9 _ . : -")
    unknown = sorted(set(keys) - set(KEYS))
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(KEYS)})")
    owner = registry.lookup(job_type)
    if owner not in (None, run_command_job):
        raise fail(f"job type {job_type!r} already has a handler in the application")
    argv = _parse_argv(keys.get("argv", ""), fail)
    env = _parse_env(keys.get("env", ""), fail)
    cwd = keys.get("cwd") or None
    if cwd is not None and not os.path.isdir(cwd):
        raise fail(f"cwd {cwd!r} is not a directory")
    _check_program(argv[0][0][1], cwd, dict(env).get("PATH", os.environ.get("PATH")), fail)
    return CommandSpec(job_type, argv, _parse_timeout(keys.get("timeout"), fail), cwd, env)


def _parse_argv(text, fail):
    try:
        elements = shlex.split(text)
    except ValueError as exc:
        raise fail(f"argv cannot be split: {exc}") from None
    if not elements:
        raise fail("argv is required: the program and its arguments")
    argv = tuple(_parse_element(element, number, fail) for number, element in enumerate(elements))
    if any(kind == "field" for kind, _ in argv[0]):
        raise fail("the program (first argv element) cannot be a placeholder")
    return argv


def _parse_element(element, number, fail):
    """("text", s) and ("field", name) parts of one argv element."""
    parts, position = [], 0
    for match in TEMPLATE_TOKEN.finditer(element):
        if match.start() > position:
            parts.append(("text", element[position:match.start()]))
        token = match.group(0)
        if match.group(1):
            parts.append(("field", match.group(1)))
        elif token in ("{{", "}}"):
            parts.append(("text", token[0]))
        else:
            raise fail(f"argv element {number + 1}: stray {token!r}; placeholders are {{name}}, "
                       f"a literal brace is written twice")
        position = match.end()
    if position < len(element) or not parts:
        parts.append(("text", element[position:]))
    return tuple(_merge_text(parts))


def _merge_text(parts):
    merged = []
    for kind, value in parts:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + value)
        else:
            merged.append((kind, value))
    return merged


def _parse_env(text, fail):
    try:
        items = shlex.split(text)
    except ValueError as exc:
        raise fail(f"env cannot be split: {exc}") from None
    pairs = []
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not ENV_NAME.match(name):
            raise fail(f"env entries are NAME=VALUE, got {name or item!r}")
        if name.startswith(OWN_ENV_PREFIXES):
            raise fail(f"env cannot set {name}: {' and '.join(p + '*' for p in OWN_ENV_PREFIXES)}"
                       f" are prefork-queue's")
        pairs.append((name, value))
    return tuple(pairs)


def _parse_timeout(text, fail):
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise fail(f"timeout must be a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise fail("timeout must be a number of seconds greater than 0")
    return value


def _check_program(program, cwd, path, fail):
    """The program must exist now: a typo is a config error at start, not dead jobs."""
    if "/" in program:
        found = os.path.join(cwd or ".", program)
        if not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise fail(f"program {program!r} is not an executable file")
    elif shutil.which(program, path=path) is None:
        raise fail(f"program {program!r} not found in PATH")


def install(specs):
    """Register the command job types as handlers (in the parent, before forking).

    A type dropped from the config at a reload keeps our handler, which then
    refuses its jobs as an unknown type (the registry has no removal).
    """
    _configured.clear()
    _configured.update(specs)
    for job_type, spec in specs.items():
        registry.handler(job_type, soft_timeout=spec.timeout)(run_command_job)


def handled_types(specs):
    """The job types that have a handler once `specs` are installed."""
    kept = {job_type for job_type in registry.registered_types()
            if registry.lookup(job_type) is not run_command_job}
    return kept | set(specs)


# -- running ---------------------------------------------------------------------

def render_argv(spec, payload):
    """The argv for one job: each placeholder filled inside its own element.
    RejectedJob (permanent, safe to store: it names the placeholder, never the value)."""
    return [_render_element(element, payload) for element in spec.argv]


def _render_element(element, payload):
    return "".join(value if kind == "text" else _argument_text(value, payload)
                   for kind, value in element)


def _argument_text(name, payload):
    if name not in payload:
        raise RejectedJob(f"command placeholder {{{name}}}: no such key in the payload")
    value = payload[name]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str) and "\0" not in value:
        return value
    raise RejectedJob(f"command placeholder {{{name}}}: the value must be a string "
                      f"(without NUL), a number or a boolean")


def run_command_job(job):
    """The handler of every command job type."""
    spec = _configured.get(job.type)
    if spec is None:
        raise RejectedJob("unknown job type")
    status = execute(spec, render_argv(spec, job.payload), job)
    if status != 0:
        raise CommandFailed(describe_status(status))


def describe_status(returncode):
    if returncode < 0:
        try:
            return f"command killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"command killed by signal {-returncode}"
    if returncode == TEMPFAIL:
        return f"command exited {TEMPFAIL} (temporary failure)"
    return f"command exited {returncode}"


def command_environment(spec, job):
    """The supervisor's environment without prefork-queue's own variables, plus the
    section's env and what the program may want to know about its job."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(OWN_ENV_PREFIXES)}
    env.update(spec.env)
    env.update(PREFORK_JOB_ID=str(job.id), PREFORK_JOB_TYPE=job.type,
               PREFORK_JOB_QUEUE=job.queue, PREFORK_JOB_ATTEMPT=str(job.attempt))
    if job.idempotency_key:
        env["PREFORK_JOB_KEY"] = job.idempotency_key
    return env


def execute(spec, argv, job):
    """Run the program to its end, relaying its output; returns its returncode.

    A JobTimeout (soft timeout) or QuickStop raised while it runs stops the
    program's whole process group (SIGTERM, SIGKILL after KILL_GRACE) and
    propagates.
    """
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=spec.cwd,
                                env=command_environment(spec, job), start_new_session=True,
                                preexec_fn=preexec_die_with_parent(
                                    signal.SIGKILL, then=_restore_ignored_signals))
    except OSError as exc:
        raise CommandFailed(f"command could not start: {exc.strerror}") from None
    event("command_started", job_id=job.id, type=job.type, program=argv[0], command_pid=proc.pid)
    try:
        relay_output(proc, OutputLog(job))
        status = proc.wait()
    finally:
        if proc.returncode is None:
            _stop(proc, job)
        proc.stdout.close()
        proc.stderr.close()
    event("command_exited", job_id=job.id, type=job.type, status=describe_status(status),
          elapsed_ms=round((time.monotonic() - started) * 1000, 1))
    return status


def _restore_ignored_signals():
    """Signals the worker ignores come back at their default in the program."""
    for signum in PARENT_ONLY_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def _stop(proc, job):
    """Stop the program and whatever it started: SIGTERM to its process group, SIGKILL
    after KILL_GRACE (or at once if we are interrupted meanwhile)."""
    event("command_stopping", job_id=job.id, type=job.type, command_pid=proc.pid,
          grace_s=KILL_GRACE)
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    finally:
        _signal_group(proc.pid, signal.SIGKILL)   # left-over members of the group, too
        proc.wait()


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def relay_output(proc, output):
    """Log stdout and stderr line by line until both end (or shortly after the
    program exited, should a grandchild keep them open)."""
    streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    exited_at = None
    while streams:
        ready, _, _ = select.select(list(streams), [], [], 0.5)
        for fd in ready:
            chunk = os.read(fd, READ_SIZE)
            if chunk:
                output.feed(streams[fd], chunk)
            else:
                output.finish(streams.pop(fd))
        if streams and proc.poll() is not None:
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > DRAIN_AFTER_EXIT:
                break
    for stream in streams.values():
        output.finish(stream)
    output.report_dropped()


class OutputLog:
    """A command's output as command_output events: one per line, cut at
    MAX_LINE_BYTES, at most MAX_LINES per job (the rest are only counted)."""

    def __init__(self, job):
        self.job = job
        self.logged = self.dropped = 0
        self.pending = {"stdout": bytearray(), "stderr": bytearray()}
        self.cutting = {"stdout": False, "stderr": False}   # inside an overlong line

    def feed(self, stream, chunk):
        pending = self.pending[stream]
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = bytes(pending[:end])
            del pending[:end + 1]
            if self.cutting[stream]:
                self.cutting[stream] = False   # the rest of a line already logged cut
            else:
                self._line(stream, line)
        if len(pending) > MAX_LINE_BYTES:
            if not self.cutting[stream]:
                self._line(stream, bytes(pending))
            self.cutting[stream] = True
            pending.clear()

    def finish(self, stream):
        """The stream ended: log its last line, if it had no newline."""
        pending = self.pending[stream]
        if pending and not self.cutting[stream]:
            self._line(stream, bytes(pending))
        pending.clear()

    def report_dropped(self):
        if self.dropped:
            event("command_output_truncated", job_id=self.job.id, type=self.job.type,
                  dropped_lines=self.dropped, max_lines=MAX_LINES)

    def _line(self, stream, raw):
        if self.logged >= MAX_LINES:
            self.dropped += 1
            return
        self.logged += 1
        fields = {}
        if len(raw) > MAX_LINE_BYTES:
            raw, fields["truncated"] = raw[:MAX_LINE_BYTES], True
        text = CONTROL_CHARS.sub("?", raw.decode("utf-8", "replace").rstrip("\r"))
        event("command_output", job_id=self.job.id, type=self.job.type, stream=stream,
              line=text, **fields)
