"""The command line, a module per group of commands.

parser.py holds the command registry and builds the argument parser; main.py,
the entry point, holds the supervisor's signals and hands over to dispatch.py,
which parses, loads the config, runs one command and turns errors into exit codes
(exit_codes.py); setup.py, jobs.py, supervise.py, operations.py and bench.py
register their commands with parser.command. Command modules never import
main.py or dispatch.py, so nothing here imports in a circle.
"""
