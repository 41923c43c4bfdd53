"""The command line's real parser (prefork.cli.parser.build_parser, every command
registered), for sphinx-argparse. Each command's settings are named in one line of its
description rather than listed in full: `config` reads every setting and lists them all
once, with their help, and the settings page has the rest."""
import argparse

from prefork.cli.dispatch import every_command
from prefork.cli.parser import SETTINGS_GROUP, build_parser, commands_of

LISTS_THEM_ALL = "config"


def parser_for_docs() -> argparse.ArgumentParser:
    every_command()
    parser = build_parser()
    for name, command in commands_of(parser).items():
        if name != LISTS_THEM_ALL:
            _name_the_settings(command)
    return parser


def _name_the_settings(command: argparse.ArgumentParser) -> None:
    """The command's settings group taken off, its flags named after its description."""
    [group] = [group for group in command._action_groups if group.title == SETTINGS_GROUP]
    flags = [option for action in group._group_actions for option in action.option_strings]
    command._actions[:] = [action for action in command._actions
                           if action not in group._group_actions]
    command._action_groups.remove(group)
    command.description = (f"{command.description} Settings it reads: {', '.join(flags)} "
                           f"(all of them under {LISTS_THEM_ALL}).")
