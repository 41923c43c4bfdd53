"""prefork-queue as the engine of Django's Tasks framework (`django.tasks` in Django 6,
the `django_tasks` backport before it).

    INSTALLED_APPS = [..., "prefork.contrib.django"]
    TASKS = {"default": {"BACKEND": "prefork.contrib.django.TaskBackend",
                         "QUEUES": ["default"], "OPTIONS": {"database": "default"}}}

and `prefork-queue --workers 8 --django myproject.settings` runs the tasks. Tasks
in chains and groups: `enqueue_workflow(prefork.chain(job(task, *args), ...))`
(workflows.py). In a test, `prefork.testing.inline(testing_config())` runs the
tasks on Django's test database. All are imported on first use: Django imports this
package while it fills its app registry, before the Tasks framework may be loaded.
"""
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "TaskBackend":
        from .backend import TaskBackend
        return TaskBackend
    if name in ("job", "enqueue_workflow"):
        from . import workflows
        return getattr(workflows, name)
    if name == "testing_config":
        from .runner import testing_config
        return testing_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
