"""The handler registry: job type name -> function, filled by the application.

Handlers are looked up by the job type string only; nothing in job data can
name a module or class to import.
"""
import importlib
import re

from .errors import UserError

JOB_TYPE_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

_handlers = {}
_timeouts = {}


def handler(job_type, soft_timeout=None, hard_timeout=None):
    """Register the decorated function as the handler of `job_type`.

    The function receives a `prefork.Job`. Returning normally completes the
    job; raising `prefork.PermanentError` sends it to dead; any other
    exception schedules a retry with backoff. soft_timeout / hard_timeout
    (seconds) override the configured ones for this job type.
    """
    if not JOB_TYPE_PATTERN.match(job_type or ""):
        raise ValueError(f"invalid job type name: {job_type!r}")

    def register(func):
        _handlers[job_type] = func
        _timeouts[job_type] = (soft_timeout, hard_timeout)
        return func

    return register


def lookup(job_type):
    """The handler for `job_type`, or None when the application has none."""
    return _handlers.get(job_type)


def timeouts(job_type, config):
    """(soft, hard) timeout in seconds for a job type; 0 means none."""
    soft, hard = _timeouts.get(job_type, (None, None))
    return (config.soft_timeout if soft is None else soft,
            config.hard_timeout if hard is None else hard)


def registered_types():
    return sorted(_handlers)


def import_apps(module_names):
    """Import the application modules that register handlers (once, in the parent)."""
    for name in module_names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an application import error is a user error at start
            raise UserError(f"cannot import app module {name!r}: {type(exc).__name__}: {exc}") from exc
