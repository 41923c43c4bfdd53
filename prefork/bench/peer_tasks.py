"""The job the django-tasks-db peer of the bench enqueues (peers.py): a django-tasks
Task, made as its documentation says, by the decorator at import. It needs Django
set up first, so only that peer imports this module, and only then."""
from typing import Any

from django_tasks import task


@task()
def noop(payload: dict[str, Any]) -> None:
    """Nobody runs it: the bench measures the enqueue."""
