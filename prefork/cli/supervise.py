"""`prefork-queue run`, the default command: the supervisor."""
import argparse

from ..config import Config
from ..store import create_embedded
from ..supervisor import startup
from .exit_codes import ExitCode
from .helpers import import_handlers
from .parser import command


@command("run", "Start the supervisor: fork --workers children and watch them (the default).")
def run_command(args: argparse.Namespace, config: Config) -> int:
    with startup.CleanStop():
        from ..supervisor.loop import Supervisor
        import_handlers(config)
        create_embedded(config)   # a SQLite file: the workers' children find it ready
        return Supervisor(config, args.flags).run()
    return ExitCode.OK   # a stop signal ended the start-up (CleanStop logged it)
