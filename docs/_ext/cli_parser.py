"""The command line's real parser (prefork.cli.main.build_parser, every command
registered), for sphinx-argparse. The settings flags are shown once, under the top
level: each command's copy of that group is taken off here, since every command takes
them alike."""
import argparse

from prefork.cli.main import build_parser

SETTINGS_GROUP = "settings ("    # how prefork.cli.parser.settings_parser titles its group


def parser_for_docs() -> argparse.ArgumentParser:
    parser = build_parser()
    for command in commands(parser).values():
        shared = [group for group in command._action_groups
                  if (group.title or "").startswith(SETTINGS_GROUP)]
        for group in shared:
            command._actions[:] = [a for a in command._actions if a not in group._group_actions]
            command._action_groups.remove(group)
    return parser


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """{name: parser} of each command."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found
