"""`prefork-queue run`, the default command: the supervisor (with --reload true, a
watcher that runs it and starts it again when the application's files change)."""
import argparse
import os

from ..config import Config
from ..settings import BY_NAME
from ..store import create_embedded
from ..supervisor import reloader, startup
from .exit_codes import ExitCode
from .helpers import import_handlers, with_django
from .parser import command


@command("run", "Start the supervisor: fork --workers children and watch them (the default). "
         "For development, --reload true restarts it when a file of the application changes.")
def run_command(args: argparse.Namespace, config: Config) -> int:
    with startup.CleanStop():
        if config.reload and not reloader.supervised():
            reloader.refuse_under_systemd(dict(os.environ))
            return reloader.Watcher(_run_args(args), config.path).run()
        from ..contrib.django import runner
        from ..supervisor.loop import Supervisor
        given, config = config, with_django(config)   # --django: the project's database
        with reloader.reporting_files(config.app):
            import_handlers(config)
        create_embedded(config)   # a SQLite file: the workers' children find it ready
        return Supervisor(config, runner.pinned_flags(args.flags, given, config)).run()
    return ExitCode.OK   # a stop signal ended the start-up (CleanStop logged it)


def _run_args(args: argparse.Namespace) -> list[str]:
    """The command line of the supervisor the watcher starts: the same config file and
    flags (the environment, secrets included, it inherits)."""
    run_args = ["--config", args.config] if args.config else []
    for name, value in args.flags.items():
        if value is not None:
            run_args += [BY_NAME[name].flag_name, value]
    return run_args
