"""Django's test backends made of prefork.contrib.django.TaskBackend, for Django's own
Tasks tests: the adaptation (adaptation.patch) names these where the tests name
django.tasks.backends.dummy.DummyBackend and ...immediate.ImmediateBackend.

DummyBackend enqueues and nothing runs the tasks; the `results` and clear() that the
tests inspect read and empty the queue's tables. ImmediateBackend runs each task as it
is enqueued: the real worker inline (prefork.testing.inline(...).drain()), then the
result read back through get_result(). As Django's, it runs a task once and keeps its
traceback, unless its OPTIONS say otherwise."""
from django.db import connections

import prefork.testing
from prefork.contrib.django import TaskBackend, testing_config
from prefork.contrib.django.compat import TaskResultDoesNotExist
from prefork.contrib.django.options import Options

IMMEDIATE = {"max_attempts": 1, "store_traceback": True}


class DummyBackend(TaskBackend):
    @property
    def results(self):
        """The results of this backend's tasks, oldest first."""
        with connections[self.database].cursor() as cursor:
            cursor.execute("SELECT id FROM prefork_jobs ORDER BY id")
            ids = [str(row[0]) for row in cursor.fetchall()]
        return [result for result in map(self._found, ids) if result is not None]

    def _found(self, result_id):
        try:
            return self.get_result(result_id)
        except TaskResultDoesNotExist:   # another backend's
            return None

    def clear(self):
        with connections[self.database].cursor() as cursor:
            cursor.execute("DELETE FROM prefork_task_results")
            cursor.execute("DELETE FROM prefork_jobs")


class ImmediateBackend(TaskBackend):
    def __init__(self, alias, params):
        super().__init__(alias, params)
        self.prefork_options = Options.parsed(alias, {**IMMEDIATE, **self.options})

    def enqueue(self, task, args, kwargs):
        result = super().enqueue(task, args, kwargs)
        with prefork.testing.inline(testing_config(self.database), raise_on_dead=False) as queue:
            queue.drain(task.queue_name)
        result.refresh()
        return result
