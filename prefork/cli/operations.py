"""The operator's commands for many hosts on one database: status, restart,
pause, resume, prune, discard."""
import argparse
import json
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import UserError
from ..jobs import QUEUE_PATTERN, JobStatus
from ..progress import Progress
from ..workflows.model import State
from . import status_report as status_report
from .helpers import checked_store
from .parser import command
from .wording import counted

if TYPE_CHECKING:
    from ..store.contract import Store

ALL_HOSTS = "*"
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
PRUNE_BATCH = 1000


def duration(text: str) -> float:
    """7d, 12h, 30m, 90s, 2w -> seconds."""
    match = DURATION.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration like 7d, 12h, 30m or 90s: {text!r}")
    return float(match.group(1)) * UNIT_SECONDS[match.group(2)]


def utc_time(text: str) -> datetime:
    """An ISO time, read as UTC when it names no zone; naive UTC for the store."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO time like 2026-12-01T03:00: {text!r}") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def queue_name(text: str) -> str:
    if not QUEUE_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"invalid queue name {text!r}")
    return text


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")


@command("status", "Supervisors on every host and what their workers do (as of each one's "
         "last heartbeat; stale when it is older than twice its own heartbeat interval); "
         "per queue: ready, delayed, reserved, dead, cancelled, done in the last hour, oldest "
         "ready job; per limited group (job type, concurrency key): running, limit, waiting.",
         arguments=_status_arguments)
def status_command(args: argparse.Namespace, config: Config) -> None:
    store = checked_store(config)
    report = status_report.build(store.status(status_report.DONE_WINDOW),
                                 config.heartbeat_interval)
    report["limits"] = status_report.limits(store.limit_usage())
    print(json.dumps(report, indent=2, default=str) if args.json else status_report.render(report))


def _restart_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=ALL_HOSTS, help="Only this host (default: every host).")
    parser.add_argument("--at", type=utc_time, metavar="TIME",
                        help="Replace children started before TIME (UTC; default: now). "
                             "A future time waits for the clock.")


@command("restart", "Replace, gracefully and one at a time, every worker started before now "
         "(for deploys); workers started after the request keep running.",
         arguments=_restart_arguments)
def restart_command(args: argparse.Namespace, config: Config) -> None:
    requested = checked_store(config).request_restart(args.host, args.at)
    where = "every host" if args.host == ALL_HOSTS else f"host {args.host}"
    print(f"restart requested for {where}: workers started before {requested} UTC are replaced")


def _queue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", type=queue_name, metavar="QUEUE")


@command("pause", "Stop every host from claiming jobs of QUEUE (running jobs finish).",
         arguments=_queue_arguments)
def pause_command(args: argparse.Namespace, config: Config) -> None:
    checked_store(config).set_paused(args.queue, True)
    print(f"queue {args.queue} paused")


@command("resume", "Let hosts claim jobs of QUEUE again.", arguments=_queue_arguments)
def resume_command(args: argparse.Namespace, config: Config) -> None:
    checked_store(config).set_paused(args.queue, False)
    print(f"queue {args.queue} resumed")


def _prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--done-older-than", type=duration, metavar="AGE",
                        help="Delete done jobs finished longer ago, e.g. 7d.")
    parser.add_argument("--dead-older-than", type=duration, metavar="AGE",
                        help="Delete dead and cancelled jobs that ended longer ago, e.g. 30d.")


@command("prune", "Delete old done (and dead and cancelled) jobs and workflows, and old "
         "supervisor records "
         "in bounded batches. For an admin account: the worker account has no DELETE.",
         arguments=_prune_arguments)
def prune_command(args: argparse.Namespace, config: Config) -> None:
    if args.done_older_than is None and args.dead_older_than is None:
        raise UserError("say what to prune: --done-older-than AGE and/or --dead-older-than AGE")
    store = checked_store(config)
    for status, age in ((JobStatus.DONE, args.done_older_than),
                        (JobStatus.DEAD, args.dead_older_than),
                        (JobStatus.CANCELLED, args.dead_older_than)):
        if age is not None:
            deleted = _prune_status(store, status, age)
            print(f"deleted {counted(deleted, f'{status} job')}")
    for state, age in ((State.DONE, args.done_older_than), (State.DEAD, args.dead_older_than),
                       (State.CANCELLED, args.dead_older_than)):
        if age is not None:
            print(f"deleted {counted(_prune_workflows(store, state, age), f'{state} workflow')}")
    # A zero age is an age (prune everything finished): only None means not given.
    records_age = args.done_older_than if args.done_older_than is not None else args.dead_older_than
    records = store.prune_processes(records_age)
    print(f"deleted {counted(records, 'old supervisor record')}")


def _prune_status(store: "Store", status: JobStatus, age: float) -> int:
    progress = Progress(store.count_finished(status, age), f"prune {status}")
    deleted = 0
    while True:
        batch = store.prune_finished(status, age, PRUNE_BATCH)
        deleted += batch
        progress.advance(batch)
        if batch < PRUNE_BATCH:
            break
    progress.finish()
    return deleted


def _prune_workflows(store: "Store", state: State, age: float) -> int:
    deleted = 0
    while True:
        batch = store.prune_workflows(state, age, PRUNE_BATCH)
        deleted += batch
        if batch < PRUNE_BATCH:
            return deleted


def _discard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="+", type=int, metavar="ID")


@command("discard", "Delete dead jobs for good (other jobs are left alone).",
         arguments=_discard_arguments)
def discard_command(args: argparse.Namespace, config: Config) -> None:
    count = checked_store(config).discard_dead(args.ids)
    left = len(args.ids) - count
    print(f"discarded {counted(count, 'dead job')}" + (
        "" if not left else f" ({left} {'was' if left == 1 else 'were'} not dead or absent)"))
