"""The Tasks framework this process has: Django's own `django.tasks` (Django 6.0 and
later) or the `django_tasks` backport (Django 4.2 and 5.2). Both define the same
contract under a few different names; everything else imports it from here.

Looked up by name, not imported statically: a type checker without Django (or with
only one of the two) sees plain modules, and one code base serves both lines.
"""
import importlib
from types import ModuleType
from typing import Any


def _first_present(*names: str) -> ModuleType:
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("prefork.contrib.django needs Django 6 (django.tasks) or the "
                      "django-tasks backport (pip install django-tasks)")


# Django's own first: with both present, the framework's module is the one tasks use.
_PACKAGE = _first_present("django.tasks", "django_tasks").__name__
_base = importlib.import_module(f"{_PACKAGE}.base")
_backends = importlib.import_module(f"{_PACKAGE}.backends.base")
_exceptions = importlib.import_module(f"{_PACKAGE}.exceptions")
_signals = importlib.import_module(f"{_PACKAGE}.signals")

FRAMEWORK: str = _PACKAGE
BaseTaskBackend: Any = _backends.BaseTaskBackend
Task: Any = _base.Task
TaskContext: Any = _base.TaskContext
TaskError: Any = _base.TaskError
TaskResult: Any = _base.TaskResult
TaskResultStatus: Any = _base.TaskResultStatus
DEFAULT_TASK_PRIORITY: int = _base.DEFAULT_TASK_PRIORITY
# Renamed on the way into Django: InvalidTaskError (backport) became InvalidTask, and
# InvalidTaskBackendError InvalidTaskBackend.
InvalidTask: Any = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
InvalidTaskBackend: Any = (getattr(_exceptions, "InvalidTaskBackend", None)
                           or _exceptions.InvalidTaskBackendError)
TaskResultDoesNotExist: Any = _exceptions.TaskResultDoesNotExist
task_enqueued: Any = _signals.task_enqueued
task_started: Any = _signals.task_started
task_finished: Any = _signals.task_finished


def task_backends() -> Any:
    """The framework's TASKS handler (`task_backends[alias]` is a backend instance)."""
    return importlib.import_module(_PACKAGE).task_backends
