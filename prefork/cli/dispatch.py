"""The command line once its signals are held (main.py): load the command's module,
parse, keep the signals for `run` or give them back, load the config, run the
command, and turn what went wrong into one line on stderr and the exit code the
README promises."""
import argparse
import sys
from importlib import import_module
from typing import Optional, Sequence

from .. import logs
from ..config import load
from ..errors import DatabaseUnavailable, UserError
from ..failures import ErrorWriter, database_error
from ..settings import SETTINGS
from ..store import driver_errors
from ..supervisor import startup
from . import parser
from .exit_codes import ExitCode
from .parser import COMMANDS, DEFAULT_COMMAND, PROG, Command, command_in, with_default_command


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = with_default_command(sys.argv[1:] if argv is None else argv)
    if command_in(argv) == DEFAULT_COMMAND:
        startup.stop_on_signals()   # a stop from now on ends the supervisor's start-up
    else:
        startup.release_signals()
    for setting in SETTINGS:
        if setting.secret and any(arg.split("=", 1)[0] == setting.flag_name for arg in argv):
            # Refused by name, before argparse would echo the value in its error.
            return _fail(ExitCode.USAGE, f"there is no {setting.flag_name} flag: set "
                                         f"{setting.env_name} or use {setting.flag_name}-file")
    args = parse(argv)   # a usage error exits here, with ExitCode.USAGE
    try:
        config = load(args.flags, path=args.config)
        logs.configure_from(config)
        return COMMANDS[args.command].func(args, config) or ExitCode.OK
    except DatabaseUnavailable as exc:
        return _fail(ExitCode.DATABASE, str(exc))
    except UserError as exc:
        return _fail(ExitCode.USAGE, str(exc))
    except driver_errors() as exc:
        # What failed, in the server's words on one line: "database error
        # OperationalError 1142: INSERT command denied to user ... for table 'invoices'".
        text = " ".join(ErrorWriter().mask(database_error(exc)).splitlines())
        return _fail(ExitCode.DATABASE, f"database error {text}")
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """parser.parse, with the commands it needs registered: the one argv names; every
    one for the top level's help or a name that is no command's; none for --version."""
    name = command_in(argv)
    if name in parser.COMMAND_MODULES:
        import_module(f"{__package__}.{parser.COMMAND_MODULES[name]}")
    elif name is not None or "-h" in argv or "--help" in argv:
        every_command()
    return parser.parse(argv)


def every_command() -> dict[str, Command]:
    """Every command registered (its module imported), for the top level's help, the
    docs and the tests."""
    for module in dict.fromkeys(parser.COMMAND_MODULES.values()):
        import_module(f"{__package__}.{module}")
    return COMMANDS


def _fail(code: ExitCode, message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code
