import json
import os

from django.apps import AppConfig


def log(**fields):
    """A JSON line in $PQ_TEST_LOG, written by whichever process saw the event."""
    path = os.environ.get("PQ_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")


def on_signal(name):
    def receiver(sender, task_result, **kwargs):
        log(signal=name, id=task_result.id, status=str(task_result.status),
            sender=sender.__name__, attempts=task_result.attempts)
    return receiver


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self):
        try:
            from django.tasks import signals
        except ImportError:
            from django_tasks import signals
        for name in ("task_enqueued", "task_started", "task_finished"):
            getattr(signals, name).connect(on_signal(name), weak=False)
        if os.environ.get("PQ_TEST_RECORD_PARENT"):
            # The supervisor's own Django connection, opened at setup: no child may use it.
            from .tasks import connection_id
            log(parent_connection_id=connection_id())
