"""The command registry and the argument parser built from it.

Each command module registers `func(args, config)` with `@command(...)`; the
parser gives every command the settings flags (one per setting in
prefork.settings.SETTINGS, plus --config), and takes them before the command too,
as git and pip do: `prefork-queue --dsn mysql://... status`. Given on both
sides, the flag after the command wins: it is the one nearest the command it
configures, and the one a wrapper script appends last.
"""
import argparse
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Optional, Sequence, TypeVar

from .. import __version__
from ..config import Config
from ..settings import SETTINGS, boolean
from .exit_codes import ExitCode

PROG = "prefork-queue"
DEFAULT_COMMAND = "run"
USAGE = f"{PROG} [-h] [--version] [--config PATH] [--SETTING VALUE ...] [COMMAND] [ARGS ...]"
TOP_LEVEL_FLAGS = ("-h", "--help", "--version")
CONFIG_FLAG = "--config"
# The settings flags given before the command land under these names, so that
# a value after the command can win over them.
BEFORE_COMMAND = "before_command_"

CommandFunc = Callable[[argparse.Namespace, Config], Optional[int]]
AddArguments = Callable[[argparse.ArgumentParser], None]
Func = TypeVar("Func", bound=CommandFunc)


@dataclass(frozen=True)
class Command:
    name: str
    func: CommandFunc
    help: str
    arguments: Optional[AddArguments] = None
    # Settings flags this command takes with a meaning of its own after the
    # command (bench: --workers is a list of counts); refused before it.
    own_flags: tuple[str, ...] = ()


COMMANDS: dict[str, Command] = {}


def command(name: str, help_text: str, arguments: Optional[AddArguments] = None,
            own_flags: tuple[str, ...] = ()) -> Callable[[Func], Func]:
    """Register `func(args, config)` as a command; `arguments(parser)` adds its own options."""
    def register(func: Func) -> Func:
        COMMANDS[name] = Command(name, func, help_text, arguments, own_flags)
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
                                     or following in COMMANDS)
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

def settings_parser(dest_prefix: str = "") -> OneLineParser:
    """A parent parser with --config and a flag per setting, stored as `dest_prefix + name`."""
    parser = OneLineParser(add_help=False)
    group = parser.add_argument_group("settings (also PREFORK_QUEUE_<NAME> or the config file; "
                                      "before or after the command, after wins)")
    group.add_argument(CONFIG_FLAG, dest=dest_prefix + "config", metavar="PATH",
                       help="Config file (INI, [prefork-queue] section).")
    for setting in SETTINGS:
        if setting.flag:
            group.add_argument(setting.flag_name, dest=dest_prefix + setting.name, default=None,
                               metavar=setting.metavar or setting.name.upper(), help=setting.help)
    return parser


def _drop_inherited_option(parser: argparse.ArgumentParser, flag: str) -> None:
    """Take a shared settings flag off one command's parser (the shared action itself
    is left as it is, so the other commands keep it)."""
    action = parser._option_string_actions.pop(flag)
    parser._actions.remove(action)
    for group in parser._action_groups:
        if action in group._group_actions:
            group._group_actions.remove(action)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=PROG, parents=[settings_parser(BEFORE_COMMAND)], usage=USAGE,
                           description="A pre-fork supervisor for a durable, database-backed "
                           "job queue. Without a command: run.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", prog=PROG)
    shared = settings_parser()
    for name, entry in COMMANDS.items():
        # add_parser makes a OneLineParser too: it builds commands with the parser's class.
        sub = subparsers.add_parser(name, help=entry.help, description=entry.help,
                                    parents=[shared])
        for flag in entry.own_flags:
            _drop_inherited_option(sub, flag)
        if entry.arguments:
            entry.arguments(sub)
    return parser


# --- reading the parsed flags ------------------------------------------------------------

def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse argv (which names its command); set `args.flags`, {setting: raw flag value
    or None}, and `args.config`, the config file path, from both sides of the command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    entry = COMMANDS[args.command]
    for flag in entry.own_flags:
        if getattr(args, BEFORE_COMMAND + _dest(flag), None) is not None:
            parser.error(f"{flag} means something else to {entry.name}: give it after the "
                         f"command, e.g. {PROG} {entry.name} {flag} ...")
    args.config = _nearest(args, "config")
    args.flags = {setting.name: _nearest(args, setting.name) for setting in SETTINGS}
    return args


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _nearest(args: argparse.Namespace, dest: str) -> Optional[str]:
    """The value given after the command, else the one given before it, else None."""
    after = getattr(args, dest, None)
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
