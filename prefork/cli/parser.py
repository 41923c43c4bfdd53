"""The command registry and the argument parser built from it.

Each command module registers `func(args, config)` with `@command(...)`. A command
takes its own options, --config, and a flag for each setting it reads (declared in
prefork.settings: Setting.readers); its --help lists those, and `config`, which reads
them all, lists every setting. The flag of a setting a command does not read is
refused, naming the commands that read it: a value that would change nothing must
not pass for one that did.

The settings flags go before the command too, as git and pip take theirs:
`prefork-queue --dsn mysql://... status`. Given on both sides, the flag after the
command wins: it is the one nearest the command it configures, and the one a
wrapper script appends last.
"""
import argparse
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Optional, Sequence, TypeVar

from ..config import Config
from ..settings import SETTINGS, Setting, boolean, readers_text
from .exit_codes import ExitCode

PROG = "prefork-queue"
DEFAULT_COMMAND = "run"
USAGE = f"{PROG} [-h] [--version] [--config PATH] [--SETTING VALUE ...] [COMMAND] [ARGS ...]"
TOP_LEVEL_FLAGS = ("-h", "--help", "--version")
CONFIG_FLAG = "--config"
CONFIG_HELP = "Config file (INI, [prefork-queue] section)."
# Where the settings flags land: before the command under one prefix, after it under
# another, so that the one after can win and no command's own option is taken for one.
BEFORE_COMMAND = "before_command_"
AFTER_COMMAND = "setting_"
SETTINGS_GROUP = "settings it reads"   # the group's title (docs/_ext/cli_parser.py finds it)

CommandFunc = Callable[[argparse.Namespace, Config], Optional[int]]
AddArguments = Callable[[argparse.ArgumentParser], None]
Func = TypeVar("Func", bound=CommandFunc)


@dataclass(frozen=True)
class Command:
    name: str
    func: CommandFunc
    help: str
    arguments: Optional[AddArguments] = None


COMMANDS: dict[str, Command] = {}
# The module of prefork.cli that registers each command, in the order the top level's
# --help lists them: a command line imports its command's module alone (dispatch.py).
COMMAND_MODULES = {
    "run": "supervise",
    "enqueue": "jobs", "work": "jobs", "failed": "jobs", "retry": "jobs", "show": "jobs",
    "status": "operations", "restart": "operations", "pause": "operations",
    "resume": "operations", "prune": "operations", "discard": "operations",
    "cancel": "cancel",
    "workflow": "workflows",
    "migrate": "setup", "grants": "setup", "config": "setup",
    "doctor": "doctor",
    "bench": "bench",
    "dashboard": "dashboard",
}


def command(name: str, help_text: str,
            arguments: Optional[AddArguments] = None) -> Callable[[Func], Func]:
    """Register `func(args, config)` as a command; `arguments(parser)` adds its own options."""
    def register(func: Func) -> Func:
        if f"{__package__}.{COMMAND_MODULES.get(name)}" != func.__module__:
            raise AssertionError(f"command {name!r}: list it in COMMAND_MODULES, under "
                                 f"{func.__module__.rpartition('.')[2]!r}")
        COMMANDS[name] = Command(name, func, help_text, arguments)
        return func
    return register


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem, exit 2.

    No abbreviated options: `--db-password` must not be taken for `--db-password-file`.
    """
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message} (see --help)\n")


class VersionAction(argparse.Action):
    """--version: the installed release, read only when asked for (it takes the package
    metadata, which nothing else on a command's way needs)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="Print the version and exit.",
                         **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> NoReturn:
        from .. import __version__
        print(f"{PROG} {__version__}")
        parser.exit()


class NotRead(argparse.Action):
    """The flag of a setting the command does not read: refused, naming its readers."""

    def __init__(self, option_strings: Sequence[str], dest: str, command: str,
                 setting: Setting, **kwargs: Any) -> None:
        # With or without a value (`--workers 3`, `--workers`): refused all the same.
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.command, self.setting = command, setting

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> NoReturn:
        parser.error(not_read(self.command, self.setting))


def not_read(command_name: str, setting: Setting) -> str:
    return f"{command_name} does not read {setting.flag_name}: a setting of {readers_text(setting)}"


# --- finding the command ------------------------------------------------------------

def flags_with_a_value() -> set[str]:
    """The options that may come before the command and take the next word as value."""
    return {CONFIG_FLAG} | {setting.flag_name for setting in SETTINGS if setting.flag}


def command_in(argv: Sequence[str]) -> Optional[str]:
    """The first word of argv that is neither an option nor an option's value."""
    takes_value = flags_with_a_value()
    value_next = False
    for arg in argv:
        if value_next:
            value_next = False
        elif arg.startswith("-"):
            value_next = arg in takes_value   # "--dsn URL", not "--dsn=URL"
        else:
            return arg
    return None


def with_switch_values(argv: Sequence[str]) -> list[str]:
    """argv with a value for each true/false flag given alone: `--reload` is
    `--reload=true`, as gunicorn's `--reload` is on. Alone means last, or followed
    by another option or a command's name; any other word is the flag's value, so
    `--reload no` is refused for its value rather than taken for `--reload true`."""
    switches = {s.flag_name for s in SETTINGS if s.flag and s.parse is boolean}
    spelled = []
    for number, arg in enumerate(argv):
        following = argv[number + 1] if number + 1 < len(argv) else None
        alone = arg in switches and (following is None or following.startswith("-")
                                     or following in COMMAND_MODULES)
        spelled.append(f"{arg}=true" if alone else arg)
    return spelled


def with_default_command(argv: Sequence[str]) -> list[str]:
    """argv naming its command: `run` when it names none (`prefork-queue --workers 8`),
    unless it asks the top level for --help or --version; true/false flags given
    alone spelled out (with_switch_values)."""
    argv = with_switch_values(argv)
    if command_in(argv) is None and not any(arg in TOP_LEVEL_FLAGS for arg in argv):
        return [DEFAULT_COMMAND, *argv]
    return list(argv)


# --- building the parser ------------------------------------------------------------------

def _add_settings(parser: argparse.ArgumentParser, entry: Command) -> None:
    """--config and the flag of each setting the command reads, in a group of their own;
    the flag of each other setting refused (NotRead), unless the command has an option
    of that name (bench's --workers is a list of worker counts)."""
    group = parser.add_argument_group(
        SETTINGS_GROUP, f"Also PREFORK_QUEUE_<NAME> or a key of the config file; a flag "
        f"goes before or after the command (after wins). `{PROG} config --help` lists every "
        "setting.")
    group.add_argument(CONFIG_FLAG, dest=AFTER_COMMAND + "config", metavar="PATH",
                       help=CONFIG_HELP)
    for setting in SETTINGS:
        if not setting.flag:
            continue
        if setting.read_by_command(entry.name):
            group.add_argument(setting.flag_name, dest=AFTER_COMMAND + setting.name,
                               metavar=setting.metavar or setting.name.upper(),
                               help=setting.help)
        elif setting.flag_name not in parser._option_string_actions:
            parser.add_argument(setting.flag_name, action=NotRead, dest=argparse.SUPPRESS,
                                command=entry.name, setting=setting)


def _top_level_settings(parser: argparse.ArgumentParser) -> None:
    """Every settings flag, taken before the command (each is checked against the
    command's once it is known); only --config is listed in the top level's help."""
    parser.add_argument(CONFIG_FLAG, dest=BEFORE_COMMAND + "config", metavar="PATH",
                        help=CONFIG_HELP)
    for setting in SETTINGS:
        if setting.flag:
            parser.add_argument(setting.flag_name, dest=BEFORE_COMMAND + setting.name,
                                help=argparse.SUPPRESS)


def build_parser(only: Optional[str] = None) -> OneLineParser:
    """The parser of the commands registered, in COMMAND_MODULES's order; with `only`,
    that command's options alone are added (a command line has one command)."""
    parser = OneLineParser(
        prog=PROG, usage=USAGE,
        description="A pre-fork supervisor for a durable, database-backed job queue. "
        "Without a command: run. The settings flags (--dsn, --workers, ...) go before or "
        f"after the command: `{PROG} COMMAND --help` lists those the command reads, "
        f"`{PROG} config --help` every one.")
    parser.add_argument("--version", action=VersionAction)
    _top_level_settings(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", prog=PROG)
    for name in COMMAND_MODULES:
        entry = COMMANDS.get(name)
        if entry is None:
            continue   # its module is not imported: the command line names another
        # add_parser makes a OneLineParser too: it builds commands with the parser's class.
        sub = subparsers.add_parser(name, help=entry.help, description=entry.help)
        if only is None or only == name:
            if entry.arguments:
                entry.arguments(sub)
            _add_settings(sub, entry)
    return parser


# --- reading the parsed flags ------------------------------------------------------------

def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse argv (which names its command); set `args.flags`, {setting: raw flag value
    or None} of the settings the command reads, and `args.config`, the config file path,
    from both sides of the command."""
    parser = build_parser(only=command_in(argv))
    args = parser.parse_args(argv)
    entry = COMMANDS[args.command]
    own_options = commands_of(parser)[entry.name]._option_string_actions
    for setting in SETTINGS:
        if getattr(args, BEFORE_COMMAND + setting.name, None) is None or \
                setting.read_by_command(entry.name):
            continue
        if not isinstance(own_options.get(setting.flag_name), NotRead):
            parser.error(f"{setting.flag_name} means something else to {entry.name}: give it "
                         f"after the command, e.g. {PROG} {entry.name} {setting.flag_name} ...")
        parser.error(not_read(entry.name, setting))
    args.config = _nearest(args, "config")
    args.flags = {setting.name: _nearest(args, setting.name) if setting.read_by_command(
        entry.name) else None for setting in SETTINGS}
    return args


def commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """{name: parser} of each command of a parser build_parser() made."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _nearest(args: argparse.Namespace, dest: str) -> Optional[str]:
    """The value given after the command, else the one given before it, else None."""
    after = getattr(args, AFTER_COMMAND + dest, None)
    return after if after is not None else getattr(args, BEFORE_COMMAND + dest, None)


# --- argument types shared by commands --------------------------------------------------

def whole_number(text: str) -> int:
    """--max-jobs N, --limit N: a whole number from 1 (--max-jobs 0 would mean "never stop")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
