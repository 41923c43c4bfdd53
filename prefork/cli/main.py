"""The command line's entry point: parse, load the config, run one command, and
turn what went wrong into one line on stderr and the exit code the README promises."""
import sys
from typing import Optional, Sequence

from .. import logs
from ..config import load
from ..settings import SETTINGS
from ..errors import DatabaseUnavailable, UserError
from ..failures import ErrorWriter, database_error
from ..store import driver_errors
from ..supervisor.startup import catch_signals_early
# Importing a command module registers its commands, listed in --help in this order.
from . import supervise  # noqa: F401,I001  (run, the default, first)
from . import jobs  # noqa: F401
from . import cancel  # noqa: F401
from . import workflows  # noqa: F401
from . import setup  # noqa: F401
from . import doctor  # noqa: F401
from . import operations  # noqa: F401
from . import bench  # noqa: F401
from . import dashboard  # noqa: F401
from .exit_codes import ExitCode
from .parser import COMMANDS, PROG, build_parser, command_in, parse, with_default_command

# Re-exported with every command registered, for tests and tools.
__all__ = ["COMMANDS", "build_parser", "main", "parse"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = with_default_command(sys.argv[1:] if argv is None else argv)
    if command_in(argv) == "run":
        # First of all: a supervisor takes its signals from its first instruction.
        catch_signals_early()
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


def _fail(code: ExitCode, message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code
