"""Producing and handling jobs: enqueue, work, failed, retry, show."""
import argparse
import json
import logging
import signal
from datetime import datetime
from types import FrameType
from typing import Optional

from .. import logs
from ..config import Config
from ..errors import UserError
from ..failures import HISTORY_LENGTH, TRACEBACKS_KEPT, AttemptTraceback, parsed_history
from ..job_fields import check_job_types
from ..jobs import MAX_ATTEMPTS_LIMIT, JobStatus, new_job
from ..store import driver_errors
from ..store.contract import JobRow, Store
from ..times import utc_iso
from .exit_codes import ExitCode
from .helpers import checked_store, import_handlers
from .handled import Enqueued, check_handled, warn
from .jobs_file import enqueue_file
from .parser import command, whole_number
from .wording import counted

ERROR_WIDTH = 32   # `failed` shows this much of each error
CUT = "\u2026"      # ends an error `failed` cut (an ellipsis)


# --- producing --------------------------------------------------------------------

def _enqueue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", nargs="?", metavar="TYPE",
                        help="Job type (a registered handler name).")
    parser.add_argument("payload", nargs="?", metavar="JSON", help="Payload: a JSON object.")
    parser.add_argument("--queue", default="default")
    parser.add_argument("--key", help="Idempotency key: the same queue and key give the same job.")
    parser.add_argument("--delay", type=float, default=0.0, metavar="S",
                        help="Run no sooner than S seconds from now.")
    parser.add_argument("--priority", type=int, default=0, help="Lower runs first (default 0).")
    parser.add_argument("--concurrency-key", metavar="K",
                        help="The job's limit group within its type: a handler's concurrency "
                             "and rate limits hold per key.")
    parser.add_argument("--file", metavar="JOBS.jsonl", help='One job a line: {"type": ..., '
                        '"payload": {...}, "queue", "key", "delay", "priority", "max_attempts", '
                        '"concurrency_key"}. Lines commit 1,000 at a time; if the database '
                        'goes away mid-file, the error says which line to resume from.')
    parser.add_argument("--from-line", type=whole_number, metavar="N",
                        help="With --file: start at line N of the file, skipping the lines "
                             "before it (resume a file that was cut off).")
    parser.add_argument("--force", action="store_true",
                        help="Enqueue even a job type that no running supervisor of its queue "
                             "handles (with --app: that the application has no handler for).")


@command("enqueue", "Enqueue a job (prints its id), or many from a JSON-lines file.",
         arguments=_enqueue_arguments)
def enqueue_command(args: argparse.Namespace, config: Config) -> None:
    if args.file:
        if args.type or args.payload:
            raise UserError("give either TYPE [JSON] or --file, not both")
        if args.concurrency_key is not None:
            raise UserError("--concurrency-key goes with TYPE: in --file, give a line its "
                            "\"concurrency_key\"")
        enqueue_file(args.file, config, args.from_line or 1, args.force)
        return
    if args.from_line is not None:
        raise UserError("--from-line goes with --file")
    if not args.type:
        raise UserError("give a job TYPE (and a JSON payload), or --file JOBS.jsonl")
    if not args.force:
        check_job_types([args.type], config)
    job = new_job(args.type, args.payload or "{}", queue=args.queue, key=args.key,
                  delay=args.delay, priority=args.priority,
                  max_attempts=config.max_attempts,
                  max_payload_bytes=config.max_payload_bytes,
                  concurrency_key=args.concurrency_key)
    store = checked_store(config)
    warnings = [] if args.force or config.app else check_handled(
        [Enqueued(job.queue, job.type)], config, store)
    print(store.enqueue(job))
    warn(warnings)


# --- working ------------------------------------------------------------------------

def _work_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="Process at most one job, then exit.")
    mode.add_argument("--stop-when-empty", action="store_true", help="Exit when no job is ready.")
    mode.add_argument("--max-jobs", type=whole_number, metavar="N", help="Exit after N jobs.")


@command("work", "Run the worker loop in this process, without forking (debugging, cron).",
         arguments=_work_arguments)
def work_command(args: argparse.Namespace, config: Config) -> Optional[int]:
    from ..limits.declared import declared_rules, handled_types
    from ..worker.loop import Worker
    store = checked_store(config)   # first: no queue database is the one thing to say
    import_handlers(config)
    # As `run` does at start: jobs of its limited types are enqueued (and flagged) as such.
    store.publish_limits(list(declared_rules().values()), handled_types())
    worker = Worker(store, config)

    def stop(signum: int, frame: Optional[FrameType]) -> None:
        worker.request_stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        worker.run(once=args.once, stop_when_empty=args.stop_when_empty, max_jobs=args.max_jobs)
    except driver_errors() as exc:
        # A fresh process gets a fresh connection: exit, let the caller restart us.
        logs.event("worker_fatal", level=logging.ERROR, error=worker.errors.describe(exc),
                   code=exc.args[0] if exc.args else None)
        return ExitCode.DATABASE
    return None


# --- inspecting and repairing ----------------------------------------------------------

def _failed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue")
    parser.add_argument("--limit", type=whole_number, default=100)


@command("failed", f"List dead jobs (never their payloads). An error longer than {ERROR_WIDTH} "
         f"characters is cut and ends in {CUT}: `show ID` prints it whole.",
         arguments=_failed_arguments)
def failed_command(args: argparse.Namespace, config: Config) -> None:
    rows = checked_store(config).dead_jobs(queue=args.queue, limit=args.limit)
    print(f"{'ID':>10}  {'QUEUE':<16} {'TYPE':<28} {'ATT':>3}  {'ERROR':<{ERROR_WIDTH}} "
          "FINISHED (UTC)")
    for row in rows:
        print(f"{row['id']:>10}  {row['queue']:<16} {row['job_type']:<28} {row['attempts']:>3}  "
              f"{_cut(row['last_error'] or ''):<{ERROR_WIDTH}} {utc_iso(row['finished_at'])}")


def _cut(error: str) -> str:
    """The error on one line, cut to ERROR_WIDTH with CUT as its last character if longer."""
    line = " ".join(error.split())
    return line if len(line) <= ERROR_WIDTH else line[:ERROR_WIDTH - len(CUT)] + CUT


def _retry_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", type=int, metavar="ID",
                        help="Dead or cancelled jobs to run again.")
    parser.add_argument("--all", action="store_true", help="Every dead job (of --queue).")
    parser.add_argument("--cancelled", action="store_true",
                        help="With --all: the cancelled jobs too.")
    parser.add_argument("--queue")
    parser.add_argument("--max-attempts", type=whole_number, metavar="N",
                        help="Also set their max_attempts to N (at least 1): more attempts "
                        "for jobs that used theirs up. A handler's own max_attempts still caps.")


@command("retry", "Put dead (or cancelled) jobs back to ready with attempts reset (their "
         "error history stays, for `show`). By ID: dead and cancelled jobs; --all: every "
         "dead job, and every cancelled one with --cancelled.",
         arguments=_retry_arguments)
def retry_command(args: argparse.Namespace, config: Config) -> None:
    if bool(args.ids) == bool(args.all):
        raise UserError("give job ids or --all")
    if args.cancelled and not args.all:
        raise UserError("--cancelled goes with --all (by id, cancelled jobs are retried anyway)")
    if args.max_attempts is not None and args.max_attempts > MAX_ATTEMPTS_LIMIT:
        raise UserError(f"--max-attempts must be from 1 to {MAX_ATTEMPTS_LIMIT}")
    statuses = (JobStatus.DEAD, JobStatus.CANCELLED) if args.ids or args.cancelled \
        else (JobStatus.DEAD,)
    count = checked_store(config).retry_dead(None if args.all else args.ids, queue=args.queue,
                                             max_attempts=args.max_attempts, statuses=statuses)
    print(f"retried {counted(count, 'job')}")


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=int, metavar="ID")
    parser.add_argument("--traceback", action="store_true",
                        help=f"Also print the tracebacks the job keeps of its last "
                        f"{TRACEBACKS_KEPT} failed attempts, as text after the JSON (what "
                        "error_detail allows: under `class`, frames and class, no message).")


@command("show", "Show one job, as JSON, every time in UTC as ISO 8601 with its zone; a ready "
         "job that is not due yet says when it runs (\"waiting\": \"retrying at TIME\" after "
         "a failed attempt, \"delayed until TIME\" before its first); a running job being "
         "cancelled says so (\"cancel\": \"requested at TIME: its supervisor is stopping "
         f"it\"). \"error_history\" lists its last {HISTORY_LENGTH} failed attempts (attempt, "
         "at, error), oldest first; \"max_attempts\" is the limit that applies once an "
         "attempt failed (a handler's own cap included); a done job has its \"result\" "
         "(what its handler returned; null when nothing, or once expired) and "
         "\"result_expires_at\"; a workflow's job says where it is in it (\"workflow\": \"step "
         "2 of chain 14\"; see `workflow ID`).", arguments=_show_arguments)
def show_command(args: argparse.Namespace, config: Config) -> None:
    store = checked_store(config)
    job = store.get(args.id)
    if job is None:
        raise UserError(f"no job {args.id}")
    job["error_history"] = parsed_history(job.get("error_history"))
    if job["status"] == JobStatus.READY:   # only then may it be waiting: ask the clock
        job = _with_waiting(job, store.control_state("*")[0])
    if job["status"] == JobStatus.RESERVED and job.get("cancel_requested_at"):
        job = _after_status(job, "cancel", f"requested at {utc_iso(job['cancel_requested_at'])}"
                                           ": its supervisor is stopping it")
    if job["status"] == JobStatus.DONE:
        job = _with_result(job, store)
    place = store.workflow_place(args.id)
    if place is not None:
        job = _after_status(job, "workflow", place.describe())
    print(json.dumps({name: utc_iso(value) if isinstance(value, datetime) else value
                      for name, value in job.items()}, default=str, indent=2,
                     ensure_ascii=False))
    if args.traceback:
        print(tracebacks_text(store.failed_attempts(args.id)))


def _with_result(job: JobRow, store: Store) -> JobRow:
    """A done job with its result and until when it is kept (None: none, or expired)."""
    kept = store.job_result(job["id"])
    return {**job, "result": kept and kept.value,
            "result_expires_at": kept and kept.expires_at}


def tracebacks_text(attempts: list[AttemptTraceback]) -> str:
    """The tracebacks a job keeps as an operator reads them: each under a line naming
    its attempt, when it failed and where it ran."""
    if not attempts:
        return "(no traceback kept: no attempt of this job failed in its handler)"
    return "\n\n".join(f"--- attempt {attempt.attempt}, failed at {utc_iso(attempt.finished_at)}"
                        f" on {attempt.worker} ---\n{attempt.traceback}" for attempt in attempts)


def _with_waiting(job: JobRow, now: datetime) -> JobRow:
    """A ready job, with "waiting" after its status when it is not due at `now`."""
    if job["available_at"] <= now:
        return job
    when = utc_iso(job["available_at"])
    waiting = f"retrying at {when}" if job["attempts"] else f"delayed until {when}"
    return _after_status(job, "waiting", waiting)


def _after_status(job: JobRow, name: str, text: str) -> JobRow:
    """The job with the field `name` right after its status, where a reader looks."""
    shown: JobRow = {}
    for field, value in job.items():
        shown[field] = value
        if field == "status":
            shown[name] = text
    return shown
