"""Run Django's Tasks tests (a folder holding Django's tests/tasks, adapted) with
Django's test runner on this folder's settings, and write each test's outcome as JSON:

    python run.py TESTS_FOLDER OUTCOMES.json LABEL...

Outcomes: {"test_tasks.TaskTestCase.test_name": ["passed" | "failed" | "error" |
"skipped", detail]}; a test with a failing subtest is failed."""
import json
import os
import sys
import unittest
from pathlib import Path

FAILED = ("failed", "error")


class Recording(unittest.TextTestResult):
    """Each test's outcome by its id (without the `tasks.` package)."""

    outcomes: dict = {}

    def record(self, test, outcome, detail=""):
        name = test.id().removeprefix("tasks.")
        if self.outcomes.get(name, ("",))[0] not in FAILED:
            self.outcomes[name] = (outcome, detail)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self.record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.record(test, "skipped", reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.record(test, "failed", f"{subtest}: {self._exc_info_to_string(err, test)}")


def main(folder, out, labels):
    sys.path[:0] = [folder, str(Path(__file__).resolve().parent)]
    os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
    import django
    django.setup()
    from django.test.runner import DiscoverRunner

    class Runner(DiscoverRunner):
        def get_resultclass(self):
            return Recording

    Runner(verbosity=1, interactive=False, parallel=1).run_tests(labels)
    Path(out).write_text(json.dumps(Recording.outcomes, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
