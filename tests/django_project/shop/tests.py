"""The project's own test suite (`manage.py test shop`), as an application's would be:
its tasks enqueued in the test database and run by the real worker inline
(prefork.testing.inline(testing_config()).drain()). Run by tests/contrib/test_django.py."""
from datetime import timedelta

from django.conf import settings
from django.test import TransactionTestCase, override_settings
from django.utils import timezone

import prefork.testing
from prefork.contrib.django import testing_config
from prefork.contrib.django.compat import TaskResultDoesNotExist

from . import tasks

REFUSED = "prefork.contrib.django.execution.ResultRefused"


def drain():
    with prefork.testing.inline(testing_config(), raise_on_dead=False) as queue:
        return queue.drain()


def options(**changed):
    """The project's default backend with these OPTIONS changed."""
    default = settings.TASKS["default"]
    return {**default, "OPTIONS": {**default["OPTIONS"], **changed}}


class ResultsTests(TransactionTestCase):
    def test_a_result_reads_back_as_enqueue_returned_it(self):
        run_after = timezone.now() + timedelta(hours=1)
        result = tasks.record.using(priority=7, run_after=run_after).enqueue("later")
        found = tasks.record.get_result(result.id)
        self.assertEqual(found.task.run_after, run_after)
        self.assertEqual(found.enqueued_at, result.enqueued_at)
        self.assertEqual(found, result)
        self.assertEqual(drain().scheduled, 1)   # not due yet: left waiting

    def test_a_second_alias_runs_with_its_options_and_keeps_its_results(self):
        other = options(max_attempts=1, store_traceback=True)
        with override_settings(TASKS={**settings.TASKS, "other": other}):
            result = tasks.always_fails.using(backend="other").enqueue()
            self.assertEqual(drain().dead, [int(result.id)])
            result.refresh()   # through the "other" backend
            self.assertEqual(result.status, "FAILED")
            self.assertEqual(result.attempts, 1)
            self.assertIn("ValueError: card 4111 declined", result.errors[0].traceback)
            with self.assertRaises(TaskResultDoesNotExist):
                tasks.always_fails.get_result(result.id)   # the default backend's

    def test_overridden_options_reach_the_worker(self):
        with override_settings(TASKS={"default": options(max_result_bytes=10)}):
            refused = tasks.big_result.enqueue(50)
            drain()
            refused.refresh()
            self.assertEqual([error.exception_class_path for error in refused.errors],
                             [REFUSED])
        kept = tasks.big_result.enqueue(50)   # the project's 1024 bytes again
        drain()
        kept.refresh()
        self.assertEqual(kept.status, "SUCCESSFUL")
        self.assertEqual(kept.return_value, "x" * 50)
