"""`prefork-queue cancel`: stop jobs by id, or every unfinished job of a queue and/or
type, and say what became of each."""
import argparse
import json
import sys
from typing import Optional

from ..cancellation import CancelReport
from ..config import Config
from ..errors import UserError
from ..jobs import JOB_TYPE_PATTERN
from .exit_codes import ExitCode
from .helpers import checked_store
from .operations import queue_name
from .parser import PROG, command

SHOWN_IDS = 20   # ids a line lists before "and N more" (--json lists them all)
# Each part of a report: its line's words, and what it means for those jobs.
LINES = (("cancelled", "cancelled", "never run"),
         ("stopping", "stopping", "running: their supervisors stop them, then they end "
                                  "cancelled"),
         ("finished", "already finished", "left as they are"),
         ("missing", "no such job", "never was, or pruned"))


def job_type(text: str) -> str:
    if not JOB_TYPE_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"invalid job type {text!r}")
    return text


def _cancel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", type=int, metavar="ID")
    parser.add_argument("--queue", type=queue_name, metavar="Q",
                        help="Every unfinished job of queue Q (with --type: of both).")
    parser.add_argument("--type", type=job_type, metavar="T", dest="job_type",
                        help="Every unfinished job of type T (with --queue: of both).")
    parser.add_argument("--json", action="store_true",
                        help="Print the report as JSON: {\"cancelled\": [ids], \"stopping\", "
                             "\"finished\", \"missing\"}.")


@command("cancel", "Cancel jobs by ID, or every unfinished job of --queue Q and/or --type T "
         "(one of them at least: there is no cancel of every job). A ready or delayed job is "
         "cancelled at once and never runs; a running one is stopped by its supervisor "
         "(prefork.JobCancelled in its handler; after cancel_grace seconds its worker is "
         "killed) and ends cancelled; a finished one keeps its result. Prints which jobs "
         "each of these were. Exit 4 when an ID names no job (the others are cancelled).",
         arguments=_cancel_arguments)
def cancel_command(args: argparse.Namespace, config: Config) -> Optional[int]:
    matching = args.queue is not None or args.job_type is not None
    if args.ids and matching:
        raise UserError("give job ids or --queue/--type, not both")
    if not args.ids and not matching:
        raise UserError("give job ids, or --queue Q and/or --type T to cancel the unfinished "
                        "jobs matching them")
    store = checked_store(config)
    report = (store.cancel(list(dict.fromkeys(args.ids))) if args.ids
              else store.cancel_matching(args.queue, args.job_type))
    print(json.dumps(report._asdict()) if args.json else render(report))
    if report.missing:
        # The report is out on stdout; the one line says why the exit code is not 0.
        others = "" if set(report.missing) == set(args.ids) else \
            " (the others were handled as shown)"
        print(f"{PROG}: error: no job {_id_list(report.missing)}{others}", file=sys.stderr)
        return ExitCode.MISSING
    return None


def render(report: CancelReport) -> str:
    """One line per part of the report that has jobs; a line when none matched."""
    lines = []
    for part, words, meaning in LINES:
        ids: list[int] = getattr(report, part)
        if ids:
            jobs = "1 job" if len(ids) == 1 else f"{len(ids)} jobs"
            lines.append(f"{words}: {_id_list(ids)} ({jobs}: {meaning})")
    return "\n".join(lines) or "no unfinished job matches"


def _id_list(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:SHOWN_IDS]))
    return shown if len(ids) <= SHOWN_IDS else f"{shown} and {len(ids) - SHOWN_IDS} more"
