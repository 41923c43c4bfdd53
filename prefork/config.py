"""Settings: each one declared once, driving flags, the config file, env and docs.

Precedence, lowest to highest: default, config file, environment
(`PREFORK_QUEUE_<NAME>`), command-line flag. Secrets are never read from a
flag and never printed unmasked.
"""
import configparser
import math
import os
import stat
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import UserError

ENV_PREFIX = "PREFORK_QUEUE_"
FILE_SECTION = "prefork-queue"
# Named sections beside the settings: [schedule:NAME] recurring jobs and
# [command:TYPE] job types that run a program. Their keys are checked by the
# modules that use them (schedules.py, commands.py).
NAMED_SECTION_KINDS = ("schedule", "command")
# {(kind, name): {key: raw text}} of those sections.
Sections = dict[tuple[str, str], dict[str, str]]
# A batch's jobs travel in one statement and in one message to the parent,
# which must stay under PIPE_BUF (4096 bytes) to be written whole.
MAX_CLAIM_BATCH = 64
MASK = "********"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _claim_batch(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_CLAIM_BATCH:
        raise ValueError(f"must be at most {MAX_CLAIM_BATCH}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also rejects NaN
        raise ValueError("must not be negative")
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("must be greater than 0")
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def boolean(text: str) -> bool:
    """`true` or `false` (any case, spaces around); ValueError otherwise."""
    if text.strip().lower() not in ("true", "false"):
        raise ValueError("must be true or false")
    return text.strip().lower() == "true"


def _word_list(text: Union[str, list[str], tuple[str, ...]]) -> list[str]:
    if isinstance(text, (list, tuple)):
        return list(text)
    return [part.strip() for part in str(text).split(",") if part.strip()]


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text
    parse.__name__ = "one of " + "|".join(allowed)
    return parse


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    section: str
    secret: bool = False      # masked in output; never accepted as a flag
    flag: bool = True         # also a command-line flag
    metavar: Optional[str] = None

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: list[Setting] = [
    # database
    Setting("dsn", str, "sqlite:///prefork-queue.db", "Database URL: sqlite:///relative.db, "
            "sqlite:////absolute.db (one host), or mysql://user@host:3306/db (no password in it).",
            "database", metavar="URL"),
    Setting("db_password", str, None, "Database password; environment only "
            "(PREFORK_QUEUE_DB_PASSWORD), never a flag.", "database", secret=True, flag=False),
    Setting("db_password_file", str, None, "File whose first line is the database password "
            "(mode 0600 or stricter, see db_password_file_mode_check).",
            "database", metavar="PATH"),
    Setting("db_password_file_mode_check", boolean, True, "Refuse a db_password_file that "
            "its group or others may access (as ssh and libpq do); false for a secret mount "
            "you cannot make 0600 (e.g. a 0444 container secret).", "database",
            metavar="true|false"),
    Setting("connect_timeout", _positive_float, 5.0, "Seconds to wait for a database connection.",
            "database", metavar="S"),
    Setting("read_timeout", _positive_float, 30.0, "Seconds to wait for a database reply.",
            "database", metavar="S"),
    Setting("write_timeout", _positive_float, 30.0, "Seconds to wait for a database write.",
            "database", metavar="S"),
    Setting("lock_wait_timeout", _positive_int, 5, "Seconds a queue statement waits for a row "
            "lock (innodb_lock_wait_timeout) or a metadata lock before it gives up and retries.",
            "database", metavar="S"),
    # jobs
    Setting("max_attempts", _positive_int, 5, "Default attempts before a failing job goes to dead.",
            "jobs", metavar="N"),
    Setting("retry_base", _positive_float, 1.0, "Backoff base in seconds: retry n waits "
            "about base * 2^(n-1), with jitter.", "jobs", metavar="S"),
    Setting("retry_cap", _positive_float, 3600.0, "Longest backoff between retries, in seconds.",
            "jobs", metavar="S"),
    Setting("max_payload_bytes", _positive_int, 65536, "Largest JSON payload accepted, in bytes.",
            "jobs", metavar="BYTES"),
    Setting("lease_seconds", _positive_float, 60.0, "How long a claim is valid before another "
            "worker may take the job back (extended while the job runs).", "jobs", metavar="S"),
    # worker
    Setting("app", _word_list, [], "Comma-separated module(s) to import; they register handlers "
            "with @prefork.handler.", "worker", metavar="MODULES"),
    Setting("queues", _word_list, ["default"], "Comma-separated queues to work, in priority order.",
            "worker", metavar="Q1,Q2"),
    Setting("claim_batch", _claim_batch, 32, "Most jobs a worker claims in one transaction "
            "when its jobs are fast (it holds at most ~50 ms of expected work; slow jobs are "
            "claimed one at a time); their completions are written together too. 1 turns "
            f"batching off; at most {MAX_CLAIM_BATCH}.", "worker", metavar="N"),
    Setting("poll_interval", _positive_float, 0.5, "Seconds between looks for ready jobs while "
            "workers are idle: the supervisor looks once for all its children (jobs enqueued on "
            "this host wake them at once); `work` backs off up to this.", "worker", metavar="S"),
    # supervisor
    Setting("workers", _positive_int, 2, "Child worker processes to keep running.", "supervisor",
            metavar="N"),
    Setting("graceful_timeout", _positive_float, 30.0, "Seconds a draining child may take to "
            "finish its job before it is killed and the job handed back.", "supervisor",
            metavar="S"),
    Setting("soft_timeout", _non_negative_float, 0.0, "Seconds after which a job's handler gets "
            "a JobTimeout exception (0: none). Per type: @prefork.handler(..., soft_timeout=).",
            "supervisor", metavar="S"),
    Setting("hard_timeout", _non_negative_float, 0.0, "Seconds after which the supervisor kills "
            "the child running a job (0: none). Per type: @prefork.handler(..., hard_timeout=).",
            "supervisor", metavar="S"),
    Setting("max_items", _non_negative_int, 0, "Recycle a child after this many jobs (0: never; "
            "1: a fresh process per job).", "supervisor", metavar="N"),
    Setting("max_items_jitter", _non_negative_int, 0, "Add 0..N to each child's max_items so "
            "children do not all recycle at once.", "supervisor", metavar="N"),
    Setting("max_memory", _non_negative_int, 0, "Recycle a child whose RSS passes this many MiB "
            "after a job (0: never).", "supervisor", metavar="MIB"),
    Setting("min_lifetime", _non_negative_float, 5.0, "Seconds a child lives before it may be "
            "recycled for memory (stops a fork loop when the limit is below the baseline).",
            "supervisor", metavar="S"),
    Setting("max_crashes", _positive_int, 3, "Worker deaths a job may cause before it goes to "
            "dead as a poison job.", "supervisor", metavar="N"),
    Setting("restart_backoff_cap", _positive_float, 30.0, "Longest wait between restarts of "
            "children that fail at start (e.g. the database is down).", "supervisor",
            metavar="S"),
    Setting("heartbeat_interval", _positive_float, 5.0, "Seconds between the supervisor's "
            "heartbeats in the process registry (see `prefork-queue status`).", "supervisor",
            metavar="S"),
    Setting("supervisor_timeout", _positive_float, 30.0, "A supervisor silent this long is "
            "pruned by any other, and the jobs its workers held are handed back at once.",
            "supervisor", metavar="S"),
    Setting("metrics_address", str, "", "Serve Prometheus metrics at HOST:PORT, e.g. "
            "127.0.0.1:9187 (off when empty; keep it on loopback).", "supervisor",
            metavar="HOST:PORT"),
    # logging
    Setting("log_format", _choice("auto", "json", "text"), "auto", "Log format: json lines, "
            "readable text, or auto (text on a terminal, json otherwise).", "logging"),
    Setting("log_level", _choice("debug", "info", "warning", "error"), "info", "Least severe "
            "level logged.", "logging"),
    Setting("log_file", str, None, "Append logs to this file instead of stderr.", "logging",
            metavar="PATH"),
]

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


class Config:
    """The effective settings: attribute access, plus where each value came from."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str],
                 path: Optional[str] = None, sections: Optional[Sections] = None) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self.path = path
        self.sections: Sections = sections or {}   # see NAMED_SECTION_KINDS

    def named(self, kind: str) -> dict[str, dict[str, str]]:
        """{name: {key: raw text}} of the [kind:name] sections of the config file."""
        return {name: keys for (section_kind, name), keys in self.sections.items()
                if section_kind == kind}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def source(self, name: str) -> str:
        return self._sources[name]

    def replace(self, **changes: Any) -> "Config":
        values = dict(self._values, **changes)
        sources = dict(self._sources, **{name: "override" for name in changes})
        return Config(values, sources, self.path, self.sections)

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, shown value, source) rows with secrets masked, for `prefork-queue config`."""
        rows = []
        for setting in SETTINGS:
            value = self._values[setting.name]
            if setting.secret and value:
                shown = MASK
            elif setting.name == "dsn" and value:
                shown = masked_dsn(value)
            else:
                shown = _shown(value)
            rows.append((setting.name, shown, self._sources[setting.name]))
        return rows

    def password(self) -> Optional[str]:
        """The database password from the environment or the password file, or None."""
        if self.db_password:
            return str(self.db_password)
        if self.db_password_file:
            return self._password_from_file(self.db_password_file)
        return None

    def _password_from_file(self, path: str) -> str:
        try:
            with open(path, encoding="utf-8") as handle:
                if self.db_password_file_mode_check:
                    _check_private(path, os.fstat(handle.fileno()).st_mode)
                return handle.readline().rstrip("\r\n")
        except OSError as exc:
            raise UserError(f"cannot read db_password_file {path!r}: {exc.strerror}") from None
        except UnicodeDecodeError:   # its message would show the password's bytes
            raise UserError(f"db_password_file {path!r} is not UTF-8") from None


def _check_private(path: str, mode: int) -> None:
    """Refuse a password file others could read, or could have written: checked on the
    mode bits, since reading them as root would succeed whatever they say."""
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"db_password_file {path!r} is accessible to its group or others "
                        f"(mode {stat.S_IMODE(mode):04o}): chmod 600 it, or set "
                        f"db_password_file_mode_check = false")


def masked_dsn(dsn: str) -> str:
    """The DSN with any password in it masked: given after a ':' in the user part,
    or hidden in an encoded user name (`root%3Asecret`), which shows as MASK whole."""
    try:
        parts = urlsplit(dsn)
    except ValueError:   # malformed (e.g. an unclosed "["): shown not at all
        return MASK
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return dsn
    user, colon, _ = userinfo.partition(":")
    if ":" in unquote(user):
        user = MASK
    shown_userinfo = f"{user}:{MASK}" if colon else user
    return urlunsplit(parts._replace(netloc=f"{shown_userinfo}@{hostport}"))


def _parse(setting: Setting, raw: str, where: str) -> Any:
    try:
        return setting.parse(raw)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: invalid value for {setting.name}: {exc}") from None


def read_file(path: str) -> tuple[dict[str, str], Sections]:
    """(settings, named sections) from the config file: the raw key/value pairs of
    its [prefork-queue] section, and {(kind, name): {key: value}} of the others.

    Unknown keys and unknown sections are errors: a typo must not silently
    fall back to a default.
    """
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, "rb") as handle:
            # Decoded whole, so that an error's offset is the file's, not a chunk's.
            parser.read_string(handle.read().decode("utf-8"), source=path)
    except OSError as exc:
        raise UserError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"config file {path!r} is not UTF-8: byte offset {exc.start}") from None
    except configparser.Error as exc:
        first_line = str(exc).splitlines()[0]
        raise UserError(f"config file {path!r} is not valid: {first_line}") from None
    named: Sections = {}
    unknown_sections: list[str] = []
    for section in parser.sections():
        kind, _, name = section.partition(":")
        if kind in NAMED_SECTION_KINDS and name.strip():
            named[(kind, name.strip())] = dict(parser.items(section))
        elif section != FILE_SECTION:
            unknown_sections.append(section)
    if parser.defaults():  # configparser hides [DEFAULT] from sections(); it is not ours either
        unknown_sections.insert(0, parser.default_section)
    if unknown_sections:
        raise UserError(f"config file {path!r}: unknown section [{unknown_sections[0]}]")
    raw = dict(parser.items(FILE_SECTION)) if parser.has_section(FILE_SECTION) else {}
    for key in raw:
        if key not in BY_NAME:
            raise UserError(f"config file {path!r}: unknown setting {key!r}")
        if BY_NAME[key].secret:
            raise UserError(f"config file {path!r}: {key} must come from the environment "
                            f"({BY_NAME[key].env_name}), not the config file")
    return raw, named


def load(flags: Optional[Mapping[str, Optional[str]]] = None, path: Optional[str] = None,
         environ: Optional[Mapping[str, str]] = None) -> Config:
    """Build the effective Config from defaults, file, environment and flags."""
    flags = flags or {}
    environ = os.environ if environ is None else environ
    path = path or environ.get(ENV_PREFIX + "CONFIG") or None
    from_file, sections = read_file(path) if path else ({}, {})
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        value, source = setting.default, "default"
        if setting.name in from_file:
            value, source = _parse(setting, from_file[setting.name], f"config file {path!r}"), "file"
        if setting.env_name in environ:
            value, source = _parse(setting, environ[setting.env_name], setting.env_name), "env"
        flag = flags.get(setting.name)
        if flag is not None:
            value, source = _parse(setting, flag, setting.flag_name), "flag"
        values[setting.name], sources[setting.name] = value, source
    return Config(values, sources, path, sections)


def _shown(value: Any) -> str:
    """A setting's value as it is written in the config file."""
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def settings_table() -> str:
    """Every setting as a Markdown table, for the README."""
    rows = ["| flag | env / file key | default | meaning |", "|---|---|---|---|"]
    for setting in SETTINGS:
        flag = f"`{setting.flag_name}`" if setting.flag else "(none)"
        rows.append(f"| {flag} | `{setting.env_name}` / `{setting.name}` | "
                    f"{_shown(setting.default) or '-'} | {setting.help} |")
    return "\n".join(rows) + "\n"


def example_file() -> str:
    """A config file listing every setting, commented out at its default, by section."""
    lines = ["# prefork-queue configuration (INI). Precedence: this file < environment",
             "# (PREFORK_QUEUE_<NAME>) < command-line flags. Generated by",
             "# `prefork-queue config --example`; every setting is listed at its default.",
             "", f"[{FILE_SECTION}]"]
    section = None
    for setting in SETTINGS:
        if setting.section != section:
            section = setting.section
            lines += ["", f"# --- {section} ---"]
        lines.append(f"# {setting.help}")
        if not setting.secret:
            lines.append(f"# {setting.name} = {_shown(setting.default)}")
    return "\n".join(lines) + "\n"
