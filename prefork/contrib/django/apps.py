"""The Django app: INSTALLED_APPS = [..., "prefork.contrib.django"]. Its migration
creates the queue's tables; ready() imports the `tasks` module of every installed
app, so that every task is registered before a worker or get_result() needs it."""
from typing import Any

from django.apps import AppConfig  # type: ignore[import-untyped, import-not-found, unused-ignore]


class PreforkQueueConfig(AppConfig):  # type: ignore[misc]
    name = "prefork.contrib.django"
    label = "prefork_queue"
    verbose_name = "prefork-queue"

    def ready(self) -> Any:
        from django.utils.module_loading import autodiscover_modules  # type: ignore[import-untyped, import-not-found, unused-ignore]
        autodiscover_modules("tasks")
