"""Command jobs: [command:TYPE] sections of the config file declare a job type
that runs an external program (a PHP script, a shell tool...).

    [command:report.build]
    argv = php /srv/app/artisan report:build --format={format} -- {account}
    timeout = 600
    cwd = /srv/app
    env = APP_ENV=production LOG_CHANNEL=stderr
    concurrency = 2
    rate = 100/m

`argv` is split once, at load time, with shlex into a fixed argv. Each
`{name}` is filled from the job's payload inside the one element it stands
in: a value with spaces or shell metacharacters is still that one argument,
unchanged. No shell is involved, ever. The program (the first element) takes
no placeholder. `{{` and `}}` are literal braces.

An element that begins with a placeholder may not begin with `-` once filled:
a payload must not pass the program an option (`sort {file}` with
`--output=/some/file` writes a file). The job is refused unless the section
says `allow_option_values = true`.

Exit 0 is done; exit 75 (EX_TEMPFAIL) is a transient failure; any other exit
code or a signal is a failed attempt too. All of them are retried with
backoff until max_attempts, then dead; last_error names the code or the
signal ("command exited 3", "command killed by SIGKILL"). A payload that
cannot fill the placeholders is a permanent failure (dead at once).

stdout and stderr go to the worker's log line by line (command_output
events), cut as output_lines.py says (line length, lines per job); never stored
in the jobs table.

This module reads the sections into CommandSpecs, registers their job types and
fills an argv for each job (all pure, but for install()); command_process.py
runs the program.
"""
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import registry
from ..config import Config
from ..settings import boolean
from ..errors import CommandFailed, RejectedJob, UserError
from ..jobs import JOB_TYPE_PATTERN, Job
from ..limits.rules import LimitRule, rule_for
from .command_process import OWN_ENV_PREFIXES, describe_status, execute

# Every key of a [command:TYPE] section: (key, example value, meaning). The parser
# takes these keys and no other, and the example config shows them all.
KEY_DOCS = (
    ("argv", "php artisan report:build --format={format} -- {account}",
     "The program and its arguments, split once like a shell would, run without one; "
     "{name} is the payload's value, inside its one argument. Required."),
    ("timeout", "600", "Seconds before the job's soft timeout (default: the soft_timeout "
     "setting)."),
    ("cwd", "/srv/app", "Directory the program runs in (default: the worker's)."),
    ("env", "APP_ENV=production LOG_CHANNEL=stderr", "NAME=VALUE pairs added to the "
     "inherited environment."),
    ("allow_option_values", "false", "true lets a placeholder's value begin its argument with "
     "'-' (pass an option to the program)."),
    ("concurrency", "2", "At most this many jobs of the type run at once, across every "
     "supervisor, per concurrency key (default: no limit)."),
    ("rate", "100/m", "At most this many jobs of the type start per second (/s), minute (/m) "
     "or hour (/h), across every supervisor, per concurrency key (default: no limit)."),
)
KEYS = tuple(key for key, _, _ in KEY_DOCS)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")   # whole names only: fullmatch
# One match per token of an argv element: {{, }}, {name}, or a stray brace.
TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")

# A part of an argv element: ("text", literal text) or ("field", payload key).
Part = tuple[str, str]
Element = tuple[Part, ...]
# Makes the one-line UserError about the section being read.
Fail = Callable[[str], UserError]


@dataclass(frozen=True)
class CommandSpec:
    job_type: str
    argv: tuple[Element, ...]   # one tuple of parts per element
    timeout: float | None       # the job's soft timeout; None: the configured soft_timeout
    cwd: str | None
    env: tuple[tuple[str, str], ...]   # (name, value) pairs added to the inherited environment
    allow_option_values: bool = False  # a filled element may begin with "-"
    limit: LimitRule | None = None     # concurrency and rate; None: no limit

    def placeholders(self) -> list[str]:
        return sorted({value for element in self.argv for kind, value in element
                       if kind == "field"})


_configured: dict[str, CommandSpec] = {}   # the command types in force in this process


def section_error(config: Config, kind: str, name: str, text: str) -> UserError:
    """A one-line config error about one named section."""
    where = f"config file {config.path!r}: " if config.path else ""
    return UserError(f"{where}[{kind}:{name}]: {text}")


# -- loading ---------------------------------------------------------------------

def build(config: Config) -> dict[str, CommandSpec]:
    """{job type: CommandSpec} from the [command:TYPE] sections; UserError on the first
    problem. Pure: nothing is registered (see install)."""
    specs = {}
    for job_type, keys in sorted(config.named("command").items()):
        def fail(text: str, job_type: str = job_type) -> UserError:
            return section_error(config, "command", job_type, text)
        specs[job_type] = _parse(job_type, keys, fail)
    return specs


def _parse(job_type: str, keys: Mapping[str, str], fail: Fail) -> CommandSpec:
    if not JOB_TYPE_PATTERN.match(job_type):
        raise fail("invalid job type name: use 1-128 of A-Z a-z 0-9 _ . : -")
    unknown = sorted(set(keys) - set(KEYS))
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} (allowed: {', '.join(KEYS)})")
    owner = registry.lookup(job_type)
    if owner not in (None, run_command_job):
        raise fail(f"job type {job_type!r} already has a handler in the application")
    argv = parse_argv(keys.get("argv", ""), fail)
    env = _parse_env(keys.get("env", ""), fail)
    cwd = keys.get("cwd") or None
    if cwd is not None and not os.path.isdir(cwd):
        raise fail(f"cwd {cwd!r} is not a directory")
    _check_program(argv[0][0][1], cwd, dict(env).get("PATH", os.environ.get("PATH")), fail)
    return CommandSpec(job_type, argv, _parse_timeout(keys.get("timeout"), fail), cwd, env,
                       _parse_boolean("allow_option_values", keys.get("allow_option_values"), fail),
                       _parse_limit(job_type, keys, fail))


def parse_argv(text: str, fail: Fail) -> tuple[Element, ...]:
    """An argv template: split with shlex once, each element cut into its parts."""
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


def _parse_element(element: str, number: int, fail: Fail) -> Element:
    """("text", s) and ("field", name) parts of one argv element."""
    parts: list[Part] = []
    position = 0
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


def _merge_text(parts: list[Part]) -> list[Part]:
    merged: list[Part] = []
    for kind, value in parts:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + value)
        else:
            merged.append((kind, value))
    return merged


def _parse_env(text: str, fail: Fail) -> tuple[tuple[str, str], ...]:
    try:
        items = shlex.split(text)
    except ValueError as exc:
        raise fail(f"env cannot be split: {exc}") from None
    pairs: list[tuple[str, str]] = []
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not ENV_NAME.fullmatch(name):
            raise fail(f"env entries are NAME=VALUE, got {name or item!r}")
        if name.startswith(OWN_ENV_PREFIXES):
            raise fail(f"env cannot set {name}: {' and '.join(p + '*' for p in OWN_ENV_PREFIXES)}"
                       f" are prefork-queue's")
        pairs.append((name, value))
    return tuple(pairs)


def _parse_timeout(text: str | None, fail: Fail) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise fail(f"timeout must be a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise fail("timeout must be a number of seconds greater than 0")
    return value


def _parse_limit(job_type: str, keys: Mapping[str, str], fail: Fail) -> LimitRule | None:
    """The section's concurrency and rate keys (absent or empty: no such limit)."""
    concurrency: object = keys.get("concurrency", "").strip() or None
    if isinstance(concurrency, str) and concurrency.isascii() and concurrency.isdigit():
        concurrency = int(concurrency)   # anything else is named as it was written
    try:
        return rule_for(job_type, concurrency, keys.get("rate", "").strip() or None)
    except UserError as exc:
        raise fail(str(exc)) from None


def _parse_boolean(key: str, text: str | None, fail: Fail) -> bool:
    try:
        return boolean(text or "false")
    except ValueError:
        raise fail(f"{key} must be true or false, got {text!r}") from None


def _check_program(program: str, cwd: str | None, path: str | None, fail: Fail) -> None:
    """The program must exist now: a typo is a config error at start, not dead jobs."""
    if "/" in program:
        found = os.path.join(cwd or ".", program)
        if not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise fail(f"program {program!r} is not an executable file")
    elif shutil.which(program, path=path) is None:
        raise fail(f"program {program!r} not found in PATH")


def example() -> str:
    """The commented [command:TYPE] example of `prefork-queue config --example`."""
    return example_section("command:report.build", KEY_DOCS,
                           "a job type that runs a program (exit 0: done)")


def example_section(section: str, key_docs: tuple[tuple[str, str, str], ...],
                    about: str) -> str:
    """A named section, commented out: what it is, then each key's meaning and example."""
    kind = section.split(":", 1)[0]
    lines = ["", f"# --- [{kind}:NAME]: {about} ---", f"# [{section}]"]
    for key, value, meaning in key_docs:
        lines += [f"# {meaning}", f"# {key} = {value}"]
    return "\n".join(lines) + "\n"


def install(specs: Mapping[str, CommandSpec]) -> None:
    """Register the command job types as handlers (in the parent, before forking).

    A type dropped from the config at a reload keeps our handler, which then
    refuses its jobs as an unknown type (the registry has no removal).
    """
    _configured.clear()
    _configured.update(specs)
    for job_type, spec in specs.items():
        registry.handler(job_type, soft_timeout=spec.timeout)(run_command_job)
        registry.set_limit(job_type, spec.limit)


def installed() -> Mapping[str, CommandSpec]:
    """The command types in force in this process (install()'s last specs)."""
    return _configured


def handled_types(specs: Mapping[str, CommandSpec]) -> set[str]:
    """The job types that have a handler once `specs` are installed."""
    kept = {job_type for job_type in registry.registered_types()
            if registry.lookup(job_type) is not run_command_job}
    return kept | set(specs)


# -- one job: its argv here, its program run by command_process.py ---------------

def render_argv(spec: CommandSpec, payload: Mapping[str, Any]) -> list[str]:
    """The argv for one job: each placeholder filled inside its own element.
    RejectedJob (permanent, safe to store: it names the placeholder, never the value)."""
    return [_render_element(element, payload, spec.allow_option_values)
            for element in spec.argv]


def option_refusal(name: str) -> str:
    """Why a job whose placeholder would pass an option is refused (the value is not named)."""
    return (f"command placeholder {{{name}}}: the value would begin the argument with '-' "
            f"(an option); allow_option_values = true in the section allows it")


def _render_element(element: Element, payload: Mapping[str, Any],
                    allow_option_values: bool) -> str:
    filled = [value if kind == "text" else _argument_text(value, payload)
              for kind, value in element]
    text = "".join(filled)
    if text.startswith("-") and element[0][0] == "field" and not allow_option_values:
        # Name the placeholder the "-" came from, or the first one, left empty, that let
        # the template's own text lead.
        leading = next(number for number, part in enumerate(filled) if part)
        kind, name = element[leading]
        raise RejectedJob(option_refusal(name if kind == "field" else element[0][1]))
    return text


def _argument_text(name: str, payload: Mapping[str, Any]) -> str:
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


def run_command_job(job: Job) -> None:
    """The handler of every command job type."""
    spec = _configured.get(job.type)
    if spec is None:
        raise RejectedJob("unknown job type")
    status = execute(render_argv(spec, job.payload), job, spec.cwd, spec.env)
    if status != 0:
        raise CommandFailed(describe_status(status))
