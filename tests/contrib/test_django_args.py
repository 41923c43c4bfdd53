"""Task arguments Django accepts but JSON cannot carry, refused at `task.enqueue()`
with the one-line error of the queue (prefork.errors.UserError), nothing written:
keys that are one key once made JSON ({1: "a", "1": "b"} would be stored with "1"
twice, and the task would get one of the values), and nesting so deep that Django's
normalisation of the arguments overflows the stack (it must read as 65 levels do).

Run in the test project (tests/django_project) by `manage.py shell`, under both
Django lines and on both databases (test_django.py's fixtures)."""
import json

from django_harness import line, project  # noqa: F401  (pytest fixtures)

from prefork.jobs import TOO_DEEP_TO_ENQUEUE

SCRIPT = '''
import json
from django.db import connection
from shop import tasks


def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def outcome(*args, **kwargs):
    try:
        return {"id": tasks.record.enqueue(*args, **kwargs).id}
    except Exception as exc:
        return {"error": f"{type(exc).__module__}.{type(exc).__name__}: {exc}"}


found = {
    "int and str": outcome({1: "a", "1": "b"}),
    "bool and str, deeper": outcome([{"x": {True: 1, "true": 2}}]),
    "float and str, in kwargs": outcome(label={1.5: 1, "1.5": 2}),
    "None and str": outcome({None: 1, "null": 2}),
    "65 levels": outcome(nested(65)),
    "5000 levels": outcome(nested(5000)),
    "distinct int keys": outcome({1: "a", 2: "b"}),
}
with connection.cursor() as cursor:
    cursor.execute("SELECT payload FROM prefork_jobs")
    found["payloads"] = [json.loads(row[0])["args"] for row in cursor.fetchall()]
print(json.dumps(found))
'''

COLLIDE = ("prefork.errors.UserError: payload is not JSON-serializable: two keys of one "
           "object are one key in JSON (as 1 and \"1\" are), and a reader would keep one value")


def test_colliding_keys_and_deep_nesting_are_refused_at_enqueue(project):
    done = project.manage("shell", "-v", "0", "-c", SCRIPT)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for case in ("int and str", "bool and str, deeper", "float and str, in kwargs",
                 "None and str"):
        assert found[case] == {"error": COLLIDE}, case
    too_deep = {"error": f"prefork.errors.UserError: {TOO_DEEP_TO_ENQUEUE}"}
    assert found["65 levels"] == too_deep
    assert found["5000 levels"] == too_deep
    assert "id" in found["distinct int keys"]
    assert found["payloads"] == [[{"1": "a", "2": "b"}]]   # only the job that could be
