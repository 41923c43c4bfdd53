"""manage.py pq ...: what tests/contrib/test_django.py does in the project, printed as JSON."""
import json
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

import prefork
from prefork.contrib.django import enqueue_workflow, job
from shop import tasks
from shop.models import Order, Trace


class Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Enqueue and read tasks of the test project."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        order = sub.add_parser("order")
        order.add_argument("name")
        order.add_argument("--rollback", action="store_true")
        enqueue = sub.add_parser("enqueue")
        enqueue.add_argument("task")
        enqueue.add_argument("values", nargs="*", type=json.loads)
        enqueue.add_argument("--priority", type=int)
        enqueue.add_argument("--delay", type=float)
        enqueue.add_argument("--queue")
        enqueue.add_argument("--times", type=int, default=1,
                             help="enqueue the same call this many times (one process)")
        result = sub.add_parser("result")
        result.add_argument("id")
        flow = sub.add_parser("workflow", help="a chain of an order's tasks and a group of "
                              "three records with a callback, in one transaction")
        flow.add_argument("name")
        flow.add_argument("--rollback", action="store_true")
        sub.add_parser("orders")
        sub.add_parser("traces")

    def handle(self, *args, action, **options):
        print(json.dumps(getattr(self, action)(**options)))

    def order(self, name, rollback, **_):
        """An order saved and its task enqueued in one transaction."""
        found = {}
        try:
            with transaction.atomic():
                order = Order.objects.create(name=name)
                found["id"] = tasks.mark_order.enqueue(order.id).id
                found["order"] = order.id
                if rollback:
                    raise Rollback()
        except Rollback:
            pass
        return found

    def workflow(self, name, rollback, **_):
        """An order saved and two workflows of its tasks enqueued in one transaction."""
        found = {}
        try:
            with transaction.atomic():
                order = Order.objects.create(name=name)
                found["order"] = order.id
                chain = enqueue_workflow(prefork.chain(job(tasks.charge, order.id),
                                                       job(tasks.ship, order.id)))
                group = enqueue_workflow(prefork.group(
                    [job(tasks.record, label) for label in ("a", "b", "c")],
                    then=job(tasks.tally)), key=f"tally-{order.id}")
                found["chain"] = _enqueued(chain)
                found["group"] = _enqueued(group)
                if rollback:
                    raise Rollback()
        except Rollback:
            pass
        return found

    def enqueue(self, task, values, priority, delay, queue, times, **_):
        chosen = getattr(tasks, task)
        changes = {"priority": priority, "queue_name": queue,
                   "run_after": timezone.now() + timedelta(seconds=delay) if delay else None}
        chosen = chosen.using(**{key: value for key, value in changes.items() if value is not None})
        ids = [chosen.enqueue(*values).id for _ in range(times)]
        return {"id": ids[0], "ids": ids, "run_after": _iso(chosen.run_after)}

    def result(self, id, **_):
        result = tasks.mark_order.get_backend().get_result(id)
        shown = {"status": str(result.status), "attempts": result.attempts,
                 "task": result.task.module_path, "queue": result.task.queue_name,
                 "priority": result.task.priority, "args": result.args,
                 "errors": [error.exception_class_path for error in result.errors],
                 "tracebacks": [error.traceback for error in result.errors],
                 "worker_ids": result.worker_ids}
        for name in ("enqueued_at", "started_at", "last_attempted_at", "finished_at"):
            shown[name] = _iso(getattr(result, name))
        shown["run_after"] = _iso(result.task.run_after)
        if result.status == "SUCCESSFUL":
            shown["return_value"] = result.return_value
        result.refresh()   # the framework's refresh() goes through get_result() too
        return shown

    def orders(self, **_):
        return [{"id": order.id, "name": order.name, "marked_by": order.marked_by}
                for order in Order.objects.order_by("id")]

    def traces(self, **_):
        return [{"label": trace.label, "pid": trace.pid, "connection_id": trace.connection_id}
                for trace in Trace.objects.order_by("id")]


def _enqueued(enqueued):
    assert [result.id for result in enqueued.results] == [str(i) for i in enqueued.job_ids]
    return {"id": enqueued.id, "job_ids": [str(i) for i in enqueued.job_ids],
            "statuses": [str(result.status) for result in enqueued.results]}


def _iso(moment):
    return moment.isoformat() if moment else None
