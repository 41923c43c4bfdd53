"""The command line: parse, load the config, call one function per command."""
import argparse
import json
import signal
import sys

from .. import __version__, logs, registry
from ..config import SETTINGS, example_file, load, settings_table
from ..errors import UserError
from ..jobs import new_job
from ..observers import schedules
from ..progress import Progress
from ..store import driver_errors, open_store
from ..worker.loop import Worker

DEFAULT_COMMAND = "run"
BULK_CHUNK = 1000
COMMANDS = {}


def command(name, help_text, arguments=None):
    """Register `func(args, config)` as a subcommand; `arguments(parser)` adds its own options."""
    def register(func):
        COMMANDS[name] = (func, help_text, arguments)
        return func
    return register


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem, exit 2.

    No abbreviated options: `--db-password` must not be taken for `--db-password-file`.
    """
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def settings_parser():
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("settings (also PREFORK_QUEUE_<NAME> or the config file)")
    group.add_argument("--config", metavar="PATH", help="Config file (INI, [prefork-queue] section).")
    for setting in SETTINGS:
        if setting.flag:
            group.add_argument(setting.flag_name, dest=setting.name, default=None,
                               metavar=setting.metavar or setting.name.upper(), help=setting.help)
    return parser


def build_parser():
    shared = settings_parser()
    parser = OneLineParser(prog="prefork-queue", description="A pre-fork supervisor for a "
                           "durable, database-backed job queue. Without a command: run.")
    parser.add_argument("--version", action="version", version=f"prefork-queue {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (func, help_text, arguments) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text, parents=[shared])
        sub.error = OneLineParser.error.__get__(sub)
        if arguments:
            arguments(sub)
        sub.set_defaults(func=func)
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, DEFAULT_COMMAND)
    if argv[0] == "run":
        # First of all: a supervisor takes its signals from its first instruction.
        from ..supervisor.startup import catch_signals_early
        catch_signals_early()
    for setting in SETTINGS:
        if setting.secret and any(arg.split("=", 1)[0] == setting.flag_name for arg in argv):
            # Refused by name, before argparse would echo the value in its error.
            print(f"prefork-queue: error: there is no {setting.flag_name} flag: set "
                  f"{setting.env_name} or use {setting.flag_name}-file", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        flags = {setting.name: getattr(args, setting.name, None) for setting in SETTINGS}
        config = load(flags, path=args.config)
        logs.configure_from(config)
        args.flags = flags
        return args.func(args, config) or 0
    except UserError as exc:
        print(f"prefork-queue: error: {exc}", file=sys.stderr)
        return 2
    except driver_errors() as exc:
        code = exc.args[0] if exc.args else ""
        print(f"prefork-queue: error: database error {logs.error_class(exc)} {code}".rstrip(),
              file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


def checked_store(config):
    """The store, after checking that its schema is current."""
    store = open_store(config)
    store.check_schema()
    return store


# --- schema and setup -----------------------------------------------------------

@command("migrate", "Create or upgrade the queue schema (safe to run twice).")
def migrate_command(args, config):
    store = open_store(config)
    applied = store.migrate()
    print(f"applied versions {', '.join(map(str, applied))}" if applied else "schema is up to date")


def _grants_arguments(parser):
    parser.add_argument("--user", default="queue_worker", help="Worker account name.")
    parser.add_argument("--host", default="%", help="Host part of the account.")
    parser.add_argument("--database", help="Database (default: the one in the DSN).")


@command("grants", "Print least-privilege GRANT statements for a worker account.",
         arguments=_grants_arguments)
def grants_command(args, config):
    from ..store.mysql.schema import grant_statements
    from ..store.mysql.session import parse_dsn
    database = args.database or (parse_dsn(config.dsn)["database"] if config.dsn else None)
    if not database:
        raise UserError("name the database with --database or --dsn")
    print(f"-- review, then run as an administrator; create the account first:\n"
          f"-- CREATE USER '{args.user}'@'{args.host}' IDENTIFIED BY '...';")
    for statement in grant_statements(args.user, args.host, database):
        print(statement)


def _config_arguments(parser):
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--example", action="store_true",
                        help="Print a config file with every setting, commented, at its default.")
    output.add_argument("--markdown", action="store_true",
                        help="Print every setting as a Markdown table (the README's).")


@command("config", "Print the effective configuration (secrets masked) and where each value "
         "came from.", arguments=_config_arguments)
def config_command(args, config):
    if args.example or args.markdown:
        print(example_file() if args.example else settings_table(), end="")
        return
    for name, shown, source in config.describe():
        print(f"{name} = {shown}    # {source}")


# --- producing --------------------------------------------------------------------

def _enqueue_arguments(parser):
    parser.add_argument("type", nargs="?", metavar="TYPE", help="Job type (a registered handler name).")
    parser.add_argument("payload", nargs="?", metavar="JSON", help="Payload: a JSON object.")
    parser.add_argument("--queue", default="default")
    parser.add_argument("--key", help="Idempotency key: the same queue and key give the same job.")
    parser.add_argument("--delay", type=float, default=0.0, metavar="S", help="Run no sooner than S seconds from now.")
    parser.add_argument("--priority", type=int, default=0, help="Lower runs first (default 0).")
    parser.add_argument("--file", metavar="JOBS.jsonl", help='One job a line: {"type": ..., '
                        '"payload": {...}, "queue", "key", "delay", "priority", "max_attempts"}.')


@command("enqueue", "Enqueue a job (prints its id), or many from a JSON-lines file.",
         arguments=_enqueue_arguments)
def enqueue_command(args, config):
    if args.file:
        if args.type or args.payload:
            raise UserError("give either TYPE [JSON] or --file, not both")
        jobs = read_jobs_file(args.file, config)
        check_job_types({job.type for job in jobs}, config)
        store = checked_store(config)
        progress = Progress(len(jobs), "enqueue")
        new = 0
        for start in range(0, len(jobs), BULK_CHUNK):
            chunk = jobs[start:start + BULK_CHUNK]
            new += store.enqueue_many(chunk)
            progress.advance(len(chunk))
        progress.finish()
        print(f"enqueued {new} new jobs ({len(jobs) - new} already present)")
        return
    if not args.type:
        raise UserError("give a job TYPE (and a JSON payload), or --file JOBS.jsonl")
    check_job_types([args.type], config)
    job = new_job(args.type, args.payload or "{}", queue=args.queue, key=args.key,
                  delay=args.delay, priority=args.priority,
                  max_attempts=config.max_attempts,
                  max_payload_bytes=config.max_payload_bytes)
    print(checked_store(config).enqueue(job))


def check_job_types(job_types, config):
    """With `app` configured, refuse a job type no handler is registered for."""
    if not config.app:
        return
    registry.import_apps(config.app)
    for job_type in sorted(job_types):
        if registry.lookup(job_type) is None and job_type not in config.named("command"):
            raise UserError(f"unknown job type {job_type!r}: no handler in {','.join(config.app)}")


JOB_LINE_FIELDS = {"type", "payload", "queue", "key", "delay", "priority", "max_attempts"}


def read_jobs_file(path, config):
    """Validate every line before anything is written: a bad line changes nothing."""
    jobs = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    jobs.append(_job_from_line(line, f"{path}:{number}", config))
    except OSError as exc:
        raise UserError(f"cannot read {path!r}: {exc.strerror}") from None
    return jobs


def _job_from_line(line, where, config):
    try:
        fields = json.loads(line)
    except ValueError as exc:
        raise UserError(f"{where}: invalid JSON: {exc.msg}") from None
    if not isinstance(fields, dict) or "type" not in fields:
        raise UserError(f"{where}: each line must be a JSON object with a \"type\"")
    unknown = set(fields) - JOB_LINE_FIELDS
    if unknown:
        raise UserError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    try:
        return new_job(fields["type"], fields.get("payload", {}),
                       queue=fields.get("queue", "default"), key=fields.get("key"),
                       delay=fields.get("delay", 0), priority=fields.get("priority", 0),
                       max_attempts=fields.get("max_attempts", config.max_attempts),
                       max_payload_bytes=config.max_payload_bytes)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


# --- working ------------------------------------------------------------------------

EXAMPLE_APP = "prefork.examples"


def import_handlers(config):
    """Import the application; refuse to work without handlers, which would send
    every job to dead as an unknown type.

    A first run with nothing configured (no --app, the default SQLite file)
    gets the example handlers, so `prefork-queue --workers 8` shows jobs flow.
    """
    apps = config.app
    if not apps and config.source("dsn") == "default":
        apps = [EXAMPLE_APP]
        logs.event("example_handlers", level=logs.logging.WARNING, app=EXAMPLE_APP,
                   note="no --app given: running the shipped example handlers")
    registry.import_apps(apps)
    schedules.validate(config)   # [command:*] types, then [schedule:*]
    if not registry.registered_types():
        raise UserError("no job handlers registered: name your handler module(s) with --app")


@command("run", "Start the supervisor: fork --workers children and watch them (the default).")
def run_command(args, config):
    from ..supervisor.loop import Supervisor
    import_handlers(config)
    return Supervisor(config, args.flags).run()


def _job_count(text):
    """--max-jobs N, --limit N: a whole number from 1 (--max-jobs 0 would mean "never stop")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _work_arguments(parser):
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="Process at most one job, then exit.")
    mode.add_argument("--stop-when-empty", action="store_true", help="Exit when no job is ready.")
    mode.add_argument("--max-jobs", type=_job_count, metavar="N", help="Exit after N jobs.")


@command("work", "Run the worker loop in this process, without forking (debugging, cron).",
         arguments=_work_arguments)
def work_command(args, config):
    import_handlers(config)
    store = checked_store(config)
    worker = Worker(store, config)

    def stop(signum, frame):
        worker.request_stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        worker.run(once=args.once, stop_when_empty=args.stop_when_empty, max_jobs=args.max_jobs)
    except driver_errors() as exc:
        # A fresh process gets a fresh connection: exit, let the caller restart us.
        logs.event("worker_fatal", level=logs.logging.ERROR, error=logs.error_class(exc),
                   code=exc.args[0] if exc.args else None)
        return 3


# --- inspecting and repairing ----------------------------------------------------------

def _failed_arguments(parser):
    parser.add_argument("--queue")
    parser.add_argument("--limit", type=_job_count, default=100)


@command("failed", "List dead jobs (never their payloads).",
         arguments=_failed_arguments)
def failed_command(args, config):
    rows = checked_store(config).dead_jobs(queue=args.queue, limit=args.limit)
    print(f"{'ID':>10}  {'QUEUE':<16} {'TYPE':<28} {'ATT':>3}  {'ERROR':<32} FINISHED (UTC)")
    for row in rows:
        print(f"{row['id']:>10}  {row['queue']:<16} {row['job_type']:<28} {row['attempts']:>3}  "
              f"{(row['last_error'] or '')[:32]:<32} {row['finished_at']}")


def _retry_arguments(parser):
    parser.add_argument("ids", nargs="*", type=int, metavar="ID")
    parser.add_argument("--all", action="store_true", help="Every dead job (of --queue).")
    parser.add_argument("--queue")


@command("retry", "Put dead jobs back to ready with attempts reset.",
         arguments=_retry_arguments)
def retry_command(args, config):
    if bool(args.ids) == bool(args.all):
        raise UserError("give job ids or --all")
    count = checked_store(config).retry_dead(None if args.all else args.ids, queue=args.queue)
    print(f"retried {count} jobs")


def _show_arguments(parser):
    parser.add_argument("id", type=int, metavar="ID")


@command("show", "Show one job.", arguments=_show_arguments)
def show_command(args, config):
    job = checked_store(config).get(args.id)
    if job is None:
        raise UserError(f"no job {args.id}")
    print(json.dumps(job, default=str, indent=2))



# --- measuring -------------------------------------------------------------------------

def _worker_counts(text):
    """--workers 1,2,4,8: whole numbers from 1, in the order given."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("give worker counts of at least 1, e.g. 1,2,4,8")
    return counts


def _drop_inherited_option(parser, flag):
    """Take a shared settings flag off this one subcommand (the shared action itself
    is left as it is, so the other subcommands keep it)."""
    action = parser._option_string_actions.pop(flag)
    parser._actions.remove(action)
    for group in parser._action_groups:
        if action in group._group_actions:
            group._group_actions.remove(action)


def _bench_arguments(parser):
    _drop_inherited_option(parser, "--workers")   # here it is a list of counts
    group = parser.add_argument_group("benchmark")
    group.add_argument("--workers", dest="bench_workers", type=_worker_counts, default=[1, 2, 4, 8],
                       metavar="N,N,...", help="Worker counts to measure (default 1,2,4,8).")
    group.add_argument("--jobs", type=_job_count, default=20000, metavar="N",
                       help="No-op jobs per throughput run (default 20000).")
    group.add_argument("--payload-bytes", type=_job_count, default=200, metavar="BYTES",
                       help="JSON payload size of each job (default 200).")
    group.add_argument("--pickups", type=_job_count, default=50, metavar="N",
                       help="Jobs enqueued one at a time for pickup latency (default 50).")
    group.add_argument("--done-rows", type=_job_count, default=0, metavar="N",
                       help="Also fill the table with N done rows and rerun the largest "
                            "worker count (MySQL only; e.g. 1000000).")
    group.add_argument("--json", action="store_true", help="Print the report as JSON.")


@command("bench", "Measure throughput, pickup latency, database load and memory of the "
         "supervisor against a textbook baseline, on a scratch queue of the configured "
         "database. An admin tool: it DELETEs its scratch rows afterwards (even after "
         "Ctrl-C), so the account needs DELETE on prefork_jobs.", arguments=_bench_arguments)
def bench_command(args, config):
    from ..bench import Plan, run_bench
    plan = Plan(workers=args.bench_workers, jobs=args.jobs, payload_bytes=args.payload_bytes,
                pickups=args.pickups, done_rows=args.done_rows, as_json=args.json)
    return run_bench(plan, config)


from . import operations  # noqa: E402,F401  (registers the operator's commands)
