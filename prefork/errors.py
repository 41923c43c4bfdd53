"""Exceptions shared by the whole package, split by who should see them."""


class PermanentError(Exception):
    """Raised by a handler when retrying cannot help: the job goes to dead at once."""


class LeaseLost(Exception):
    """The job's lease expired or another worker owns it now; our result is void."""


class CommitConflict(Exception):
    """A handler's transaction (job.transaction()) lost to a concurrent one: a
    deadlock, or on a cluster with writers on several nodes a certification
    failure at commit. Everything it wrote was rolled back and the job is still
    ours: it is given back with its attempt restored, not failed."""


class UserError(Exception):
    """Bad input from the user (config, DSN, JSON, option...): one line, no traceback."""


class NoQueueDatabase(UserError):
    """The database named has no queue schema (a SQLite file: maybe no file at all).
    Only `run` (on SQLite) and `migrate` create one; the rest refuse with this line,
    so a producer with a forgotten DSN does not fill a database no worker reads."""

    def __init__(self, where: str, remedy: str = "start the supervisor or run migrate") -> None:
        super().__init__(f"no queue database at {where}: {remedy}, or set the DSN")


class DatabaseUnavailable(UserError):
    """The database cannot be reached or refuses us; the message names the problem."""


class RejectedJob(PermanentError):
    """A job we refuse to run (unknown type, malformed payload). Its message is
    ours, never data from the job, so it may be stored as last_error."""


class QuickStop(BaseException):
    """Raised inside a running handler on a quick stop (SIGQUIT). A BaseException so
    that a handler's `except Exception` does not swallow it."""


class JobCancelled(BaseException):
    """Raised inside a running handler whose job was cancelled (`prefork-queue cancel`,
    prefork.cancel()). A BaseException, like QuickStop, so that `except Exception`
    does not swallow it; `finally` blocks run and job.transaction() rolls back.
    The job ends cancelled and is not retried."""


class JobTimeout(Exception):
    """Raised inside a handler when its soft timeout passes; a failed attempt, retried."""


class CommandFailed(Exception):
    """A command job's program failed: "command exited 3", "command killed by SIGKILL".
    Its message is ours, never the program's output, so it may be stored as
    last_error; a failed attempt, retried."""


class JobNotFinished(Exception):
    """Client.result(): the job has not finished yet (within the time it was given)."""


class JobFailed(Exception):
    """Client.result(): the job ended without a result, dead or cancelled; the message
    says which, and its last error (as the job row keeps it)."""
