"""The handler registry: job type name -> function, filled by the application.

Handlers are looked up by the job type string only; nothing in job data can
name a module or class to import.
"""
import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

from .config import Config
from .errors import UserError
from .jobs import JOB_TYPE_PATTERN, Job

# A handler receives the claimed Job; what it returns is ignored.
Handler = Callable[[Job], object]
HandlerT = TypeVar("HandlerT", bound=Handler)
# (soft, hard) timeout in seconds set for a job type by handler(); None: the configured one.
Timeouts = tuple[float | None, float | None]

_handlers: dict[str, Handler] = {}
_timeouts: dict[str, Timeouts] = {}


def handler(job_type: str, soft_timeout: float | None = None,
            hard_timeout: float | None = None) -> Callable[[HandlerT], HandlerT]:
    """Register the decorated function as the handler of `job_type`.

    The function receives a `prefork.Job`. Returning normally completes the
    job; raising `prefork.PermanentError` sends it to dead; any other
    exception schedules a retry with backoff. soft_timeout / hard_timeout
    (seconds) override the configured ones for this job type.
    """
    if not isinstance(job_type, str) or not JOB_TYPE_PATTERN.fullmatch(job_type):
        raise ValueError(f"invalid job type name: {job_type!r}")

    def register(func: HandlerT) -> HandlerT:
        _handlers[job_type] = func
        _timeouts[job_type] = (soft_timeout, hard_timeout)
        return func

    return register


def lookup(job_type: str) -> Handler | None:
    """The handler for `job_type`, or None when the application has none."""
    return _handlers.get(job_type)


def timeouts(job_type: str, config: Config) -> tuple[float, float]:
    """(soft, hard) timeout in seconds for a job type; 0 means none."""
    soft, hard = _timeouts.get(job_type, (None, None))
    return (config.soft_timeout if soft is None else soft,
            config.hard_timeout if hard is None else hard)


def registered_types() -> list[str]:
    return sorted(_handlers)


def import_apps(module_names: Iterable[str]) -> None:
    """Import the application modules that register handlers (once, in the parent).

    The working directory comes first on the import path, as Celery and Gunicorn
    put it: `--app myapp.tasks` finds ./myapp without PYTHONPATH=. (the
    `prefork-queue` script, unlike `python -m`, does not put it there).
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for name in module_names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an application import error is a user error at start
            raise UserError(f"cannot import app module {name!r}: {type(exc).__name__}: {exc}") from exc
