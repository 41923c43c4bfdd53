"""A task's job as TaskBackend.enqueue() writes it and the worker and get_result() read
it back: one place for the payload's keys and times.

The payload holds the call (args, kwargs), the Task's own settings (priority,
run_after, the TASKS alias that enqueued it) and enqueued_at, the time enqueue()
returned to its caller; times as naive UTC text. Read back, the task is the one
enqueued (Task equality holds), and its backend is the alias's as TASKS configures
it at that moment (Django rebuilds its backends when the setting changes, as a
test's override_settings(TASKS=...) does), not as it was when the task was first seen.
"""
import dataclasses
from datetime import datetime, timezone
from typing import Any, Mapping

from ...errors import RejectedJob
from . import compat


def written(task: Any, args: Any, kwargs: Any, alias: str, enqueued_at: datetime
            ) -> dict[str, Any]:
    """The payload of `task` called with (normalised) args and kwargs, enqueued through
    the backend `alias` at `enqueued_at`."""
    payload = {"args": args, "kwargs": kwargs, "priority": task.priority, "backend": alias,
               "enqueued_at": stamp(naive_utc(enqueued_at))}
    if task.run_after is not None:
        payload["run_after"] = stamp(naive_utc(task.run_after))
    return payload


def alias_of(payload: Mapping[str, Any], task: Any) -> str:
    """The TASKS alias that enqueued the job (a job written before the payload named
    it: the task's own backend)."""
    return str(payload.get("backend") or task.backend)


def task_of(task: Any, queue: str, payload: Mapping[str, Any]) -> Any:
    """The Task as it was enqueued: `task` (the registered one, of the same function)
    with the job's queue and the payload's priority, run_after and backend."""
    return dataclasses.replace(
        task, queue_name=queue, backend=alias_of(payload, task),
        priority=payload.get("priority", compat.DEFAULT_TASK_PRIORITY),
        run_after=aware(payload.get("run_after")))


def enqueued_at(payload: Mapping[str, Any], created_at: datetime | None) -> datetime | None:
    """When enqueue() returned: the time its TaskResult said (a job not written by
    enqueue(): the row's creation)."""
    return aware(payload.get("enqueued_at") or created_at)


def backend_named(alias: str) -> Any:
    """The TASKS backend `alias` as the settings are now; a job whose alias is gone
    or is no longer one of ours cannot run (RejectedJob)."""
    try:
        backend = compat.task_backends()[alias]
    except compat.InvalidTaskBackend as exc:
        raise RejectedJob(f"TASKS has no backend {alias!r}: {exc}") from None
    if getattr(backend, "prefork_options", None) is None:
        raise RejectedJob(f"TASKS[{alias!r}] is {type(backend).__name__}, "
                          "not prefork.contrib.django.TaskBackend")
    return backend


def stamp(moment: datetime) -> str:
    """Naive UTC as the payload and the results table take it on both dialects."""
    return moment.isoformat(sep=" ", timespec="microseconds")


def naive_utc(moment: datetime) -> datetime:
    """A Django time as naive UTC (a naive one is in Django's current time zone)."""
    from django.utils import timezone as django_timezone  # type: ignore[import-untyped, import-not-found, unused-ignore]
    if django_timezone.is_naive(moment):
        moment = django_timezone.make_aware(moment)
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def aware(moment: datetime | str | None) -> datetime | None:
    """A naive UTC time (or its ISO text) as Django wants it under its USE_TZ."""
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    from django.conf import settings  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from django.utils import timezone as django_timezone  # type: ignore[import-untyped, import-not-found, unused-ignore]
    in_utc = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment
    if settings.USE_TZ:
        return in_utc
    return django_timezone.make_naive(in_utc)
