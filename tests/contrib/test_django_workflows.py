"""Django tasks in workflows, end to end: the test project (tests/django_project) enqueues
a chain of two tasks and a group of three with a callback, in the transaction that saves
an order (`manage.py pq workflow`, through prefork.contrib.django's job() and
enqueue_workflow()), and a real `prefork-queue run --django` supervisor runs them, on
MariaDB and SQLite, under Django 5.2 (the backport) and Django 6. See django_harness.py."""
import json

from conftest import wait_until
from django_harness import line, project  # noqa: F401  (fixtures)


def test_a_chain_and_a_group_of_tasks_run_in_order_and_read_back(project):
    enqueued = project.pq("workflow", "committed")
    chain, group = enqueued["chain"], enqueued["group"]
    order = enqueued["order"]
    assert chain["statuses"] == ["READY"] * 2 and group["statuses"] == ["READY"] * 4
    # Committed: the ready ones are ready, the ones that wait for others wait.
    charge_id, ship_id = chain["job_ids"]
    *record_ids, tally_id = group["job_ids"]
    shown = _shown(project, ship_id)
    assert shown["status"] == "waiting"
    assert shown["workflow"] == f"step 1 of chain {chain['id']}"
    assert _shown(project, tally_id)["status"] == "waiting"
    assert _shown(project, charge_id)["status"] == "ready"
    enqueued_signals = {line["id"] for line in project.signals()
                        if line["signal"] == "task_enqueued"}
    assert enqueued_signals == {*chain["job_ids"], *group["job_ids"]}

    project.supervisor()
    shipped = project.wait_result(ship_id, "SUCCESSFUL")
    tallied = project.wait_result(tally_id, "SUCCESSFUL")
    charged = project.pq("result", charge_id)
    assert charged["return_value"] == {"order": order, "amount": 10 * order}
    # Each step read the one before it through its context.
    assert shipped["return_value"] == {
        "order": order, "upstream": [[int(charge_id), "done", charged["return_value"]]]}
    assert tallied["return_value"] == [[int(job_id), "done", label]
                                       for job_id, label in zip(record_ids, "abc")]
    for record_id, label in zip(record_ids, "abc"):
        assert project.pq("result", record_id)["return_value"] == label

    labels = [trace["label"] for trace in project.pq("traces")]
    assert labels.index(f"charge {order}") < labels.index(f"ship {order}")
    assert labels.count("tally") == 1
    assert all(labels.index(label) < labels.index("tally") for label in "abc")
    for workflow in (chain, group):
        progress = _workflow(project, workflow["id"])
        assert progress["state"] == "done", progress


def test_the_same_key_enqueues_the_group_once_and_announces_it_once(project):
    first = project.pq("workflow", "one")
    signals = len(project.signals())
    again = project.manage("shell", "-c", _SAME_KEY.format(order=first["order"]))
    shown = json.loads(again.stdout.strip().splitlines()[-1])
    group = first["group"]
    # Its jobs as they are (read back: the record("x") of this call was not written).
    assert shown == {"id": group["id"], "job_ids": group["job_ids"],
                     "args": [["a"], ["b"], ["c"], []]}
    assert len(project.signals()) == signals   # no task_enqueued for what was not enqueued


_SAME_KEY = """
import json, prefork
from prefork.contrib.django import enqueue_workflow, job
from shop import tasks
again = enqueue_workflow(prefork.group([job(tasks.record, "x")], then=job(tasks.tally)),
                         key="tally-{order}")
print(json.dumps({{"id": again.id, "job_ids": [str(i) for i in again.job_ids],
                  "args": [result.args for result in again.results]}}))
"""


def test_a_rollback_enqueues_nothing(project):
    rolled_back = project.pq("workflow", "rolled-back", "--rollback")
    for job_id in rolled_back["chain"]["job_ids"] + rolled_back["group"]["job_ids"]:
        missing = project.manage("pq", "result", job_id, check=False)
        assert missing.returncode != 0 and "TaskResultDoesNotExist" in missing.stderr
    for workflow in (rolled_back["chain"], rolled_back["group"]):
        shown = project.cli("workflow", str(workflow["id"]))
        assert shown.returncode != 0 and f"no workflow {workflow['id']}" in shown.stderr
    assert project.signals() == []   # task_enqueued waits for a commit that never came
    assert project.pq("orders") == []


def _shown(project, job_id):
    shown = project.cli("show", job_id)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _workflow(project, workflow_id):
    def ended():
        shown = project.cli("workflow", str(workflow_id))
        assert shown.returncode == 0, shown.stderr
        found = json.loads(shown.stdout)
        return found if found["state"] != "running" else None
    return wait_until(ended, timeout=60, interval=0.2, message=f"workflow {workflow_id} ended")


_REFUSED = """
import json, prefork
from datetime import timedelta
from django.utils import timezone
from prefork.contrib.django import job
from prefork.errors import UserError
from shop import tasks
later = tasks.charge.using(run_after=timezone.now() + timedelta(hours=1))
refused = []
for make in (lambda: job(later, 1), lambda: job(print, 1), lambda: job(tasks.charge, object())):
    try:
        make()
    except (UserError, TypeError) as exc:
        refused.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(refused))
"""


def test_steps_a_workflow_cannot_run_are_refused_when_made(project):
    done = project.manage("shell", "-c", _REFUSED)
    refused = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(refused) == 3, refused
    assert refused[0].startswith("UserError: task shop.tasks.charge has a run_after")
    assert refused[1] == ("UserError: a workflow's task is a Django Task (made with @task), "
                          "not builtin_function_or_method")
    assert refused[2].startswith("TypeError")   # the framework's own check of arguments
