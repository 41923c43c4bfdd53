"""Lifecycle events as JSON lines (or readable text on a terminal).

Every event is one call: `event("job_claimed", job_id=1, ...)`, its name declared
in the catalogue (events.py). Fields are chosen by our code, never payloads. Exception
messages appear in two places only, for the operator: the traceback of what nobody
expected (`unexpected()`), and a failed job's error and traceback (job_failed,
job_dead), which follow the error_detail setting and are masked (failures.py).
"""
import io
import json
import logging
import os
import sys
import textwrap
import traceback
from datetime import datetime, timezone

from .config import Config
from .events import Event, named
from .failures import error_class as error_class  # what we may say of any exception

LOGGER = logging.getLogger("prefork")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO,
          "warning": logging.WARNING, "error": logging.ERROR}


def event(name: Event | str, level: int | None = None, **fields: object) -> None:
    """Log event `name` with `fields`, at its catalogue level unless `level` is given.
    ValueError for a name the catalogue does not declare."""
    declared = named(name)
    LOGGER.log(declared.level if level is None else level, declared.value,
               extra={"prefork_fields": fields})


def unexpected(name: Event | str, exc: BaseException, **fields: object) -> None:
    """Log event `name` at ERROR for an exception no code of ours expected: its class as
    `error`, and its `traceback`, which the operator needs to find the fault (only here:
    a traceback quotes the exception's message)."""
    event(name, level=logging.ERROR, error=error_class(exc),
          traceback="".join(traceback.format_exception(exc)).rstrip(), **fields)


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": _timestamp(record), "level": record.levelname.lower(),
                "event": record.getMessage(), "pid": record.process}
        line.update(getattr(record, "prefork_fields", {}))
        return json.dumps(line, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "prefork_fields", {})
        inline = {key: value for key, value in fields.items() if "\n" not in str(value)}
        details = " ".join(f"{key}={value}" for key, value in inline.items())
        line = (f"{_timestamp(record)} {record.levelname:<7} [{record.process}] "
                f"{record.getMessage()} {details}").rstrip()
        # A many-line field (a traceback) follows its event's line, indented, so
        # that every line that starts at the margin is an event's.
        for key, value in fields.items():
            if key not in inline:
                line += f"\n  {key}:\n" + textwrap.indent(str(value), "    ")
        return line


class PrivateFileHandler(logging.FileHandler):
    """A log file created 0600, whatever the umask would give (an existing file keeps its
    mode): events name jobs and queues, and command jobs' output is logged."""

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


def configure(log_format: str = "auto", level: str = "info",
              log_file: str | None = None) -> None:
    """(Re)configure the package logger; safe to call again, e.g. after SIGHUP or SIGUSR1.
    OSError when the log file cannot be opened: the old handler then stays in place."""
    handler: logging.Handler
    if log_file:
        handler = PrivateFileHandler(log_file, encoding="utf-8")
        stream_is_tty = False
    else:
        handler = logging.StreamHandler(sys.stderr)
        stream_is_tty = sys.stderr.isatty()
    text = log_format == "text" or (log_format == "auto" and stream_is_tty)
    handler.setFormatter(TextFormatter() if text else JsonFormatter())
    for old in list(LOGGER.handlers):
        LOGGER.removeHandler(old)
        old.close()
    LOGGER.addHandler(handler)
    LOGGER.setLevel(LEVELS[level])
    LOGGER.propagate = False


def configure_from(config: Config) -> None:
    configure(config.log_format, config.log_level, config.log_file)


def os_error_text(exc: OSError) -> str:
    """One line for an OSError of a path the operator gave: why, and which path."""
    reason = exc.strerror or error_class(exc)
    return f"{reason}: {exc.filename}" if exc.filename else reason


def current_host_pid() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"
