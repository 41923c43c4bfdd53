"""The tasks the tests enqueue (their module paths are their job types)."""
import asyncio
import os
import sys

from django.db import connection

from .models import Order, Trace

try:
    from django.tasks import task
except ImportError:   # Django < 6: the backport
    from django_tasks import task


@task
def mark_order(order_id):
    Order.objects.filter(id=order_id).update(marked_by=os.getpid())
    return {"order": order_id, "pid": os.getpid()}


@task
def always_fails():
    raise ValueError("card 4111 declined")   # a message that must not be stored


@task
def exits(code):
    sys.exit(code)   # the attempt's failure, as Django's immediate backend records it


@task(takes_context=True)
def fails_first(context):
    """Fails its first attempt, succeeds on the next: returns the attempt number."""
    if context.attempt < 2:
        raise RuntimeError("first attempt")
    return context.attempt


@task(queue_name="emails")
def record(label):
    Trace.objects.create(label=label, pid=os.getpid(), connection_id=connection_id())
    return label


@task
async def async_double(number):
    await asyncio.sleep(0)
    return number * 2


@task
def big_result(size):
    return "x" * size


def connection_id():
    """The server's id of this process's Django connection (None on SQLite)."""
    if connection.vendor != "mysql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()")
        return cursor.fetchone()[0]


@task
def charge(order_id):
    """A chain's first step: its return value is the next step's to read."""
    Trace.objects.create(label=f"charge {order_id}", pid=os.getpid())
    return {"order": order_id, "amount": 10 * order_id}


@task(takes_context=True)
def ship(context, order_id):
    """A chain's second step: what the step before it returned."""
    Trace.objects.create(label=f"ship {order_id}", pid=os.getpid())
    return {"order": order_id,
            "upstream": [[up.id, str(up.status), up.result] for up in context.upstream()]}


@task(takes_context=True)
def tally(context):
    """A group's callback: its members' ids and return values, in the order listed."""
    Trace.objects.create(label="tally", pid=os.getpid())
    return [[up.id, str(up.status), up.result] for up in context.upstream()]
