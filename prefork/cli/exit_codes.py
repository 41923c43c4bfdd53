"""The exit codes the README promises, one name each."""
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    # What the user typed or configured is wrong: usage, option, config, DSN,
    # JSON, job type, missing schema (run `prefork-queue migrate`). Retrying
    # the same command cannot help.
    USAGE = 2
    # The database cannot be reached, refuses us, or fails a statement. The
    # same command may work later: a supervisor manager may restart it.
    DATABASE = 3
    # `cancel ID...` named a job that does not exist (never did, or was pruned); the
    # ids that do exist were cancelled, as the command printed.
    MISSING = 4
    # Ctrl-C (128 + SIGINT, as a shell reports it).
    INTERRUPTED = 130
