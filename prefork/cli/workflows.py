"""Workflows from the command line: `workflow ID` shows one's progress."""
import argparse
import json

from ..config import Config
from ..errors import UserError
from .helpers import checked_store
from .parser import command


def _workflow_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=int, metavar="ID",
                        help="A workflow's (or batch's) id: prefork.enqueue_workflow() returns "
                             "it, and `show` names it for each of its jobs.")


@command("workflow", "Show a workflow's (or batch's) progress as JSON: its kind and state "
         "(running, done, dead, cancelled), its members by how they ended (total, done, "
         "dead, cancelled, pending; a nested chain or group counts as one member), whether "
         "a batch is still open, and all its jobs by state (nested ones' too).",
         arguments=_workflow_arguments)
def workflow_command(args: argparse.Namespace, config: Config) -> None:
    store = checked_store(config)
    progress = store.workflow_progress(args.id)
    if progress is None:
        raise UserError(f"no workflow {args.id}")
    shown = {"id": progress.id, "kind": progress.kind.value, "state": progress.state.value,
             "total": progress.total, "done": progress.done, "dead": progress.dead,
             "cancelled": progress.cancelled, "pending": progress.pending,
             "open": progress.is_open, "jobs": store.workflow_jobs(args.id)}
    print(json.dumps(shown, indent=2))
