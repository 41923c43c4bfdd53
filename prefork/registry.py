"""The handler registry: job type name -> function (with its timeouts, retry
rules and limits), and the hooks run after attempts, filled by the application.

Handlers are looked up by the job type string only; nothing in job data can
name a module or class to import. What the decorator returns is a Task: the
function, callable as before, with `.enqueue()`.
"""
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from .config import Config
from .errors import UserError
from .jobs import JOB_TYPE_PATTERN, Job, Outcome, Payload
from .limits.rules import LimitRule, rule_for
from .retry import RetryRules
from .worker.attempt import JobAttempt

# A handler receives the claimed Job; what it returns is kept as the job's result.
Handler = Callable[[Job], object]
Result = TypeVar("Result")
# (soft, hard) timeout in seconds set for a job type by handler(); None: the configured one.
Timeouts = tuple[float | None, float | None]
NO_RULES = RetryRules()
# A hook receives the JobAttempt that just ended; what it returns is ignored.
Hook = Callable[[JobAttempt], object]
AnyHook = TypeVar("AnyHook", bound=Hook)

_handlers: dict[str, Handler] = {}
_timeouts: dict[str, Timeouts] = {}
_rules: dict[str, RetryRules] = {}
_limits: dict[str, LimitRule] = {}
_success_hooks: list[Hook] = []
_failure_hooks: list[Hook] = []
_dead_hooks: list[Hook] = []


class Task(Generic[Result]):
    """What @prefork.handler returns: the handler, still callable as before, that
    can also enqueue a job of its type by itself: `generate.enqueue({"id": 7})`."""

    def __init__(self, job_type: str, func: Callable[[Job], Result]) -> None:
        functools.update_wrapper(self, func)
        self.job_type = job_type
        self.func = func

    def __call__(self, job: Job) -> Result:
        return self.func(job)

    def enqueue(self, payload: Payload = None, **options: Any) -> int:
        """Enqueue a job of this type on the configured DSN (opened, written, committed
        and rung by prefork.client.enqueue_task, which takes the same options as
        prefork.enqueue; max_attempts defaults to the handler's); the job id."""
        from . import client   # on first use: the worker side never needs it
        limit = rules(self.job_type).max_attempts
        if limit is not None:   # the row says how many attempts the job will get
            options.setdefault("max_attempts", limit)
        return client.enqueue_task(self.job_type, payload, **options)


def handler(job_type: str, soft_timeout: float | None = None, hard_timeout: float | None = None,
            *, retry_on: object = (), discard_on: object = (), max_attempts: int | None = None,
            backoff: object = None, concurrency: int | None = None,
            rate: str | None = None) -> Callable[[Callable[[Job], Result]], Task[Result]]:
    """Register the decorated function as the handler of `job_type`.

    The function receives a `prefork.Job`. Returning normally completes the
    job, and what it returns (JSON, within max_result_bytes) is kept as the job's
    result for result_ttl (prefork.result()); raising `prefork.PermanentError` sends it to dead; any other
    exception schedules a retry with backoff, unless the retry rules say
    otherwise (retry_on, discard_on, max_attempts, backoff: see
    prefork.retry.RetryRules). soft_timeout / hard_timeout (seconds) override
    the configured ones for this job type. concurrency (at most this many
    running at once) and rate ("100/m": starts per second, minute or hour) limit
    the type across every supervisor, per concurrency key (prefork.limits). A
    wrong argument is a one-line ValueError or TypeError here, at import.
    """
    if not isinstance(job_type, str) or not JOB_TYPE_PATTERN.fullmatch(job_type):
        raise ValueError(f"invalid job type name: {job_type!r}")
    checked_rules = RetryRules.checked(retry_on, discard_on, max_attempts, backoff)
    try:
        declared_limit = rule_for(job_type, concurrency, rate)
    except UserError as exc:
        raise ValueError(str(exc)) from None

    def register(func: Callable[[Job], Result]) -> Task[Result]:
        _handlers[job_type] = func
        _timeouts[job_type] = (soft_timeout, hard_timeout)
        _rules[job_type] = checked_rules
        set_limit(job_type, declared_limit)
        return Task(job_type, func)

    return register


def lookup(job_type: str) -> Handler | None:
    """The handler for `job_type`, or None when the application has none."""
    return _handlers.get(job_type)


def timeouts(job_type: str, config: Config) -> tuple[float, float]:
    """(soft, hard) timeout in seconds for a job type; 0 means none."""
    soft, hard = _timeouts.get(job_type, (None, None))
    return (config.soft_timeout if soft is None else soft,
            config.hard_timeout if hard is None else hard)


def rules(job_type: str) -> RetryRules:
    """The retry rules of a job type (the configured behaviour when it set none)."""
    return _rules.get(job_type, NO_RULES)


def set_limit(job_type: str, rule: LimitRule | None) -> None:
    """Make `rule` the limits of a job type (None: it has none)."""
    if rule is None:
        _limits.pop(job_type, None)
    else:
        _limits[job_type] = rule


def limit_rule(job_type: str) -> LimitRule | None:
    """The limits of a job type; None when it has none."""
    return _limits.get(job_type)


def on_success(hook: AnyHook) -> AnyHook:
    """Register hook(attempt) to run after each job completes, once its completion is
    committed; attempt is a prefork.JobAttempt. Use it as a decorator.

    Hooks run in the worker, in a thread of their own, for at most `hook_timeout`
    seconds (the hooks of one attempt together): one that raises, runs past that
    time or ends its thread is logged (hook_failed, hook_timed_out) and changes
    nothing of the job or the worker. A hook sees a read-only record, never the
    store. With a success hook registered, each completion is written on its own, at
    once (no batch of completions waits for its last job).
    """
    return _registered(_success_hooks, hook)


def on_failure(hook: AnyHook) -> AnyHook:
    """Register hook(attempt) to run after each failed attempt, once the failure is
    recorded: retried (attempt.outcome "retry", attempt.retry_in) or dead ("dead").
    attempt.exception is what the handler raised. As on_success otherwise."""
    return _registered(_failure_hooks, hook)


def on_dead(hook: AnyHook) -> AnyHook:
    """Register hook(attempt) to run when a failed attempt sends its job to dead (after
    the on_failure hooks of that attempt). As on_success otherwise. A job that the
    supervisor sends to dead (its worker died running it --max-crashes times) runs no
    hook: no worker is left to run it."""
    return _registered(_dead_hooks, hook)


def _registered(hooks: list[Hook], hook: AnyHook) -> AnyHook:
    if not callable(hook):
        raise TypeError(f"a hook must be a function taking a JobAttempt, not {hook!r}")
    if hook not in hooks:   # an application module imported again registers nothing twice
        hooks.append(hook)
    return hook


def hooks_for(outcome: Outcome) -> list[Hook]:
    """The hooks to run after an attempt that ended in `outcome`, in order: on_success
    for done; on_failure for retry; on_failure then on_dead for dead; none otherwise."""
    if outcome is Outcome.DONE:
        return list(_success_hooks)
    if outcome is Outcome.RETRY:
        return list(_failure_hooks)
    if outcome is Outcome.DEAD:
        return _failure_hooks + _dead_hooks
    return []


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
