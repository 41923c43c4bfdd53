"""Lifecycle events as JSON lines (or readable text on a terminal).

Every event is one call: `event("job_claimed", job_id=1, ...)`, its name declared
in the catalogue (events.py). Fields are chosen by our code, never payloads or raw
exception messages.
"""
import json
import logging
import os
import sys
from datetime import datetime, timezone

from .config import Config
from .events import Event, named

LOGGER = logging.getLogger("prefork")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO,
          "warning": logging.WARNING, "error": logging.ERROR}


def event(name: Event | str, level: int | None = None, **fields: object) -> None:
    """Log event `name` with `fields`, at its catalogue level unless `level` is given.
    ValueError for a name the catalogue does not declare."""
    declared = named(name)
    LOGGER.log(declared.level if level is None else level, declared.value,
               extra={"prefork_fields": fields})


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
        details = " ".join(f"{key}={value}" for key, value in fields.items())
        return (f"{_timestamp(record)} {record.levelname:<7} [{record.process}] "
                f"{record.getMessage()} {details}").rstrip()


def configure(log_format: str = "auto", level: str = "info",
              log_file: str | None = None) -> None:
    """(Re)configure the package logger; safe to call again, e.g. after SIGHUP or SIGUSR1."""
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
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


def error_class(exc: BaseException) -> str:
    """What we may say about an exception we did not raise: its class, never its message."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def current_host_pid() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"
