"""The settings: each one declared once, with its parser, default and help, driving
the command-line flags, the config file, the environment and the docs."""
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, Union

from .jobs import MAX_DELAY, QUEUE_PATTERN

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
# A supervisor works at most this many queues: its list is written in each heartbeat
# and read by every claim (one parameter a queue), so it must stay bounded.
MAX_QUEUES = 1000
MASK = "********"
# A result's JSON travels in one statement: well under the servers' default
# max_allowed_packet (MySQL 8: 64 MiB, MariaDB: 16 MiB).
MAX_RESULT_BYTES = 8 * 1024 * 1024

# Which commands read each setting. A command's --help lists the settings it reads, and
# it takes those as flags (a flag of one it does not read is refused, naming the commands
# that do); `config` reads every setting, to show it. Each section names its readers; a
# setting whose readers differ names its own (Setting.read_by).
EVERY_COMMAND = "*"
STORE_COMMANDS = ("run", "work", "bench", "enqueue", "failed", "retry", "show", "cancel",
                  "status", "restart", "pause", "resume", "prune", "discard", "migrate",
                  "doctor", "dashboard", "workflow")   # each opens the queue database
READERS_BY_SECTION = {
    "database": STORE_COMMANDS,
    "jobs": ("run", "work", "bench"),
    "worker": ("run", "work", "bench"),
    # bench passes the supervisor's settings on to the supervisors it starts
    "supervisor": ("run", "bench"),
    "dashboard": ("dashboard",),
    # the commands that take their database from Django's settings (--django)
    "integrations": ("run", "work", "enqueue", "failed", "retry", "show", "cancel", "status",
                     "restart", "pause", "resume", "prune", "discard", "migrate", "workflow"),
    "logging": (EVERY_COMMAND,),
}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


Bounded = TypeVar("Bounded", int, float)


def _at_most(parse: Callable[[str], Bounded], limit: Bounded) -> Callable[[str], Bounded]:
    """`parse`, refusing a value over `limit`."""
    def bounded(text: str) -> Bounded:
        value = parse(text)
        if value > limit:
            raise ValueError(f"must be at most {limit}")
        return value
    return bounded


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


def _queue_list(text: Union[str, list[str], tuple[str, ...]]) -> list[str]:
    """Queues in priority order, each a name a job may carry (no job could ever be in
    another), at most MAX_QUEUES: a queue listed twice is a mistake (which place counts?)."""
    queues = _word_list(text)
    bad = next((queue for queue in queues if not QUEUE_PATTERN.fullmatch(queue)), None)
    if bad is not None:
        raise ValueError(f"invalid queue name {bad[:80]!r}: use 1-64 of A-Z a-z 0-9 _ . : -")
    if len(queues) > MAX_QUEUES:
        raise ValueError(f"lists {len(queues)} queues; at most {MAX_QUEUES}")
    twice = sorted({queue for queue in queues if queues.count(queue) > 1})
    if twice:
        raise ValueError(f"lists {', '.join(repr(queue) for queue in twice)} more than once")
    return queues


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
    read_by: Optional[tuple[str, ...]] = None   # the commands that read it; None: its section's

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def readers(self) -> tuple[str, ...]:
        """The commands that read it (EVERY_COMMAND for all), `config` aside."""
        return self.read_by if self.read_by is not None else READERS_BY_SECTION[self.section]

    def read_by_command(self, command: str) -> bool:
        return command == "config" or command in self.readers or EVERY_COMMAND in self.readers


SETTINGS: list[Setting] = [
    # database
    Setting("dsn", str, "sqlite:///prefork-queue.db", "Database URL: sqlite:///relative.db, "
            "sqlite:////absolute.db (one host), or mysql://user@host:3306/db (no password in it).",
            "database", metavar="URL", read_by=(*STORE_COMMANDS, "grants")),
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
    Setting("dialect", _choice("auto", "mariadb", "mysql"), "auto", "SQL dialect for a mysql:// "
            "DSN: mariadb, mysql (only what the MySQL 8.0 and 8.4 manuals document), or auto "
            "(chosen from the server's version at connect).", "database"),
    Setting("lock_wait_timeout", _positive_int, 5, "Seconds a queue statement waits for a row "
            "lock (innodb_lock_wait_timeout) or a metadata lock before it gives up and retries.",
            "database", metavar="S"),
    # jobs
    Setting("max_attempts", _positive_int, 5, "Default attempts before a failing job goes to dead.",
            "jobs", metavar="N", read_by=("run", "work", "bench", "enqueue")),
    Setting("retry_base", _positive_float, 1.0, "Backoff base in seconds: retry n waits "
            "about base * 2^(n-1), with jitter.", "jobs", metavar="S"),
    Setting("retry_cap", _positive_float, 3600.0, "Longest backoff between retries, in seconds.",
            "jobs", metavar="S"),
    Setting("max_payload_bytes", _positive_int, 65536, "Largest JSON payload accepted, in bytes.",
            "jobs", metavar="BYTES",
            read_by=("run", "work", "bench", "enqueue")),
    Setting("result_ttl", _at_most(_non_negative_float, float(MAX_DELAY)), 86400.0,
            "Seconds a job's result (what its handler returned, as JSON) is kept after the "
            "job is done, for Client.result(), `show` and the dashboard; the supervisors clear "
            "expired ones. 0: results are not kept.", "jobs", metavar="S"),
    Setting("max_result_bytes", _at_most(_positive_int, MAX_RESULT_BYTES), 65536,
            f"Largest result kept, in bytes of its JSON (at most {MAX_RESULT_BYTES}); a larger "
            "one, or one that is not JSON, fails the job for good.", "jobs", metavar="BYTES"),
    Setting("error_detail", _choice("message", "class"), "message", "What a failed attempt's "
            "error keeps in the job row: the exception's class and message (cut to a bounded "
            "length, with credentials masked), or its class only, for handlers whose messages "
            "may carry personal data. The tracebacks follow it too, in the worker's log and "
            "those the job keeps of its last failed attempts (under class: their frames and "
            "the class, no message).",
            "jobs"),
    Setting("lease_seconds", _positive_float, 60.0, "How long a claim is valid before another "
            "worker may take the job back (extended while the job runs).", "jobs", metavar="S",
            read_by=STORE_COMMANDS),
    # worker
    Setting("app", _word_list, [], "Comma-separated module(s) to import; they register handlers "
            "with @prefork.handler.", "worker", metavar="MODULES",
            read_by=("run", "work", "enqueue", "dashboard")),
    Setting("queues", _queue_list, ["default"], "Comma-separated queues to work, in priority order.",
            "worker", metavar="Q1,Q2",
            read_by=("run", "work")),
    Setting("claim_batch", _at_most(_positive_int, MAX_CLAIM_BATCH), 32, "Most jobs a worker "
            "claims in one transaction when its jobs are fast (it holds at most ~50 ms of "
            "expected work; slow jobs are "
            "claimed one at a time); their completions are written together too. 1 turns "
            f"batching off; at most {MAX_CLAIM_BATCH}.", "worker", metavar="N"),
    Setting("poll_interval", _positive_float, 0.5, "Seconds between looks for ready jobs while "
            "workers are idle: the supervisor looks once for all its children (jobs enqueued on "
            "this host wake them at once); `work` backs off up to this.", "worker", metavar="S"),
    Setting("hook_timeout", _positive_float, 10.0, "Seconds the hooks of one attempt "
            "(@prefork.on_success, on_failure, on_dead) may run before the worker goes on "
            "without them; a hook still running then is left to finish in its thread "
            "(hook_timed_out).", "worker", metavar="S"),
    # supervisor
    Setting("workers", _positive_int, 2, "Child worker processes to keep running.", "supervisor",
            metavar="N", read_by=("run",)),
    Setting("reload", boolean, False, "Development only: restart the supervisor when a file "
            "of the application's modules or the config file changes, as gunicorn --reload does "
            "(a bare --reload is --reload true).", "supervisor", metavar="[true|false]",
            read_by=("run",)),
    Setting("graceful_timeout", _positive_float, 30.0, "Seconds a draining child may take to "
            "finish its job before it is killed and the job handed back.", "supervisor",
            metavar="S"),
    Setting("cancel_grace", _positive_float, 10.0, "Seconds a cancelled running job's handler "
            "may take to return after JobCancelled is raised in it, before its child is killed "
            "(and replaced) and the job ends cancelled.", "supervisor", metavar="S"),
    Setting("soft_timeout", _non_negative_float, 0.0, "Seconds after which a job's handler gets "
            "a JobTimeout exception (0: none). Per type: @prefork.handler(..., soft_timeout=).",
            "supervisor", metavar="S",
            read_by=("run", "bench", "work")),
    Setting("hard_timeout", _non_negative_float, 0.0, "Seconds after which the supervisor kills "
            "the child running a job (0: none). Per type: @prefork.handler(..., hard_timeout=).",
            "supervisor", metavar="S"),
    Setting("claimer", _choice("supervisor", "worker"), "supervisor", "Who claims the jobs: "
            "the supervisor, for all its children in one transaction, writing the completions "
            "they report with its next claim; or each worker child for itself. With limits "
            "declared each child claims for itself; with max_items 1 the supervisor hands "
            "each new child its job at the fork.",
            "supervisor"),
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
            metavar="S",
            read_by=("run", "bench", "status", "dashboard", "enqueue")),
    Setting("supervisor_timeout", _positive_float, 30.0, "A supervisor silent this long is "
            "pruned by any other, and the jobs its workers held are handed back at once.",
            "supervisor", metavar="S",
            read_by=("run", "bench", "doctor")),
    Setting("wakeup_bind", str, "", "Listen for cross-host wake-ups on this UDP HOST:PORT "
            "of a private interface (e.g. 10.0.0.5:8188; port 0 picks one) and publish it in "
            "the registry: producers anywhere ring it after an enqueue, and the supervisor looks "
            "at once instead of at its next poll (paced to 20 extra looks/s). Off when empty; "
            "a restart applies a change.", "supervisor", metavar="HOST:PORT"),
    Setting("doorbell", boolean, True, "Same-host wake-ups through a Unix datagram socket "
            "(false: only polls and wakeup_bind wake this supervisor).", "supervisor",
            metavar="true|false"),
    Setting("metrics_address", str, "", "Serve Prometheus metrics at HOST:PORT, e.g. "
            "127.0.0.1:9187 (off when empty; keep it on loopback).", "supervisor",
            metavar="HOST:PORT"),
    # dashboard
    Setting("dashboard_bind", str, "127.0.0.1:8187", "HOST:PORT the dashboard serves on "
            "(`prefork-queue dashboard`); keep it on loopback or behind a proxy.", "dashboard",
            metavar="HOST:PORT"),
    Setting("dashboard_url_prefix", str, "", "Path the dashboard is served under behind a "
            "reverse proxy, e.g. /queue (empty: the root).", "dashboard", metavar="PATH"),
    Setting("dashboard_allowed_hosts", _word_list, [], "Host names the dashboard is also "
            "served under, e.g. queue.example.com behind a reverse proxy (.example.com: it and "
            "every name under it). It always answers to its bind address, and to localhost, "
            "127.0.0.1 and ::1 when bound to loopback; any other Host header is refused (400).",
            "dashboard", metavar="HOSTS"),
    Setting("dashboard_redact", _word_list, ["password", "secret", "token", "authorization",
                                             "api_key"],
            "Payload keys whose values the dashboard masks (any depth, any case).", "dashboard",
            metavar="KEYS"),
    Setting("dashboard_password", str, None, "Password that unlocks the dashboard's actions "
            "(read-only without one); environment only (PREFORK_QUEUE_DASHBOARD_PASSWORD), "
            "never a flag.", "dashboard", secret=True, flag=False),
    Setting("dashboard_password_file", str, None, "File whose first line is the dashboard "
            "password (mode 0600 or stricter, as db_password_file).", "dashboard",
            metavar="PATH"),
    Setting("dashboard_enqueue_token", str, None, "Token that turns on the dashboard's HTTP "
            "enqueue endpoint (POST /api/enqueue with `Authorization: Bearer TOKEN`; off "
            "without one); at least 32 characters; environment only "
            "(PREFORK_QUEUE_DASHBOARD_ENQUEUE_TOKEN), never a flag.", "dashboard", secret=True,
            flag=False),
    Setting("dashboard_enqueue_token_file", str, None, "File whose first line is the enqueue "
            "endpoint's token (mode 0600 or stricter, as db_password_file).", "dashboard",
            metavar="PATH"),
    # integrations
    Setting("django", str, "", "Django settings module (as DJANGO_SETTINGS_MODULE): set Django "
            "up once in the supervisor and run the tasks of its INSTALLED_APPS.",
            "integrations", metavar="MODULE"),
    Setting("sentry_dsn", str, None, "Sentry DSN: report every failed attempt to Sentry "
            "(prefork.contrib.sentry, the `sentry` extra); environment only "
            "(PREFORK_QUEUE_SENTRY_DSN), never a flag.", "integrations", secret=True,
            flag=False),
    Setting("sentry_dsn_file", str, None, "File whose first line is the Sentry DSN (mode "
            "0600 or stricter, as db_password_file).", "integrations", metavar="PATH"),
    Setting("sentry_send_payload", boolean, False, "Send a failed job's payload (and the "
            "local variables of its traceback's frames, which may hold it) with its Sentry "
            "report; off, a report has the job's type, queue, id and attempt only.",
            "integrations", metavar="true|false"),
    # logging
    Setting("log_format", _choice("auto", "json", "text"), "auto", "Log format: json lines, "
            "readable text, or auto (text on a terminal, json otherwise).", "logging"),
    Setting("log_level", _choice("debug", "info", "warning", "error"), "info", "Least severe "
            "level logged.", "logging"),
    Setting("log_file", str, None, "Append logs to this file instead of stderr.", "logging",
            metavar="PATH"),
    Setting("capture_output", boolean, True, "Log what a worker child writes to its stdout "
            "and stderr (a handler's print(), C code, a program it starts) line by line as "
            "job_output events naming the job; false: it goes where the supervisor's output "
            "goes, as it is (e.g. for a debugger in a handler).", "logging",
            metavar="true|false"),
]

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def shown(value: Any) -> str:
    """A setting's value as it is written in the config file."""
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def readers_text(setting: Setting) -> str:
    """The commands that read a setting, in words for its docs."""
    if EVERY_COMMAND in setting.readers:
        return "every command"
    if set(STORE_COMMANDS) <= set(setting.readers):
        return ", ".join(["every command that opens the database",
                          *(name for name in setting.readers if name not in STORE_COMMANDS)])
    return ", ".join(setting.readers)


def settings_table() -> str:
    """Every setting as a Markdown table, for the settings reference."""
    rows = ["| flag | env / file key | default | read by | meaning |", "|---|---|---|---|---|"]
    for setting in SETTINGS:
        flag = f"`{setting.flag_name}`" if setting.flag else "(none)"
        rows.append(f"| {flag} | `{setting.env_name}` / `{setting.name}` | "
                    f"{shown(setting.default) or '-'} | {readers_text(setting)} | "
                    f"{setting.help} |")
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
            lines.append(f"# {setting.name} = {shown(setting.default)}")
    return "\n".join(lines) + "\n"
