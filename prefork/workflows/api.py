"""Workflows on the application's own connection, inside its open transaction, as
prefork.enqueue() takes it (connections.py): nothing is committed here, so the
workflow's rows commit or roll back with the caller's.

    flow = prefork.chain(prefork.job("order.charge", {"order": 7}),
                         prefork.job("order.ship", {"order": 7}))
    enqueued = prefork.enqueue_workflow(conn, flow, key="order-7")
    conn.commit()

    batch = prefork.open_batch(conn, on_success=prefork.job("import.report", {}))
    batch.add(conn, prefork.job("import.row", {"row": 1}), prefork.job("import.row", {"row": 2}))
    batch.close(conn)     # its callbacks start once every member ended
    conn.commit()
"""
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

from .. import connections
from ..errors import UserError
from ..jobs import check_key
from .model import Enqueued, Progress
from .plan import plan_batch, plan_flow
from .spec import Flow, JobSpec, Step, steps_of

Connection = Any   # as prefork.enqueue()'s (client.Connection)


@contextmanager
def _flows(conn: Connection, caller: str) -> Iterator[Any]:
    """The backend's workflow statements on a cursor of conn's transaction."""
    backend, dbapi = connections.in_transaction(conn, caller)
    with closing(dbapi.cursor()) as cursor, backend.queue_schema_named(dbapi):
        yield backend.flows_on(cursor)


def enqueue_workflow(conn: Connection, flow: Flow, *, key: str | None = None) -> Enqueued:
    """Enqueue a chain or a group (nested as you like) on the application's connection,
    inside its open transaction; does not commit. key: the workflow's idempotency key
    (one workflow per key: a repeated key enqueues nothing and returns the workflow it
    names). Returns the workflow's id and its jobs' ids, in the order they were listed
    (a group's `then` after its members)."""
    plan = plan_flow(flow)
    if key is not None:
        check_key(key, "workflow key")
    with _flows(conn, "prefork.enqueue_workflow()") as flows:
        enqueued: Enqueued = flows.insert_plan(plan, key)
        return enqueued


class Batch:
    """An open batch: jobs (or chains and groups) are added to it until it is closed;
    once closed and every member ended, its on_complete callback starts, and its
    on_success callback if every member is done. prefork.open_batch() makes one;
    Batch(id) takes up one opened earlier (by another process, say)."""

    def __init__(self, batch_id: int) -> None:
        self.id = batch_id

    def __repr__(self) -> str:
        return f"Batch({self.id})"

    def add(self, conn: Connection, *steps: Step) -> list[int]:
        """Add members, ready at once, inside conn's open transaction (no commit): their
        jobs' ids. UserError when the batch is closed (or no batch)."""
        listed = steps_of(steps, "a batch's member")
        with _flows(conn, "Batch.add()") as flows:
            job_ids, _ = flows.add_members(self.id, listed)
            return list(job_ids)

    def close(self, conn: Connection) -> None:
        """Take no more members, inside conn's open transaction (no commit). When every
        member has ended already, the callbacks start with this commit."""
        with _flows(conn, "Batch.close()") as flows:
            flows.close_batch(self.id)


def open_batch(conn: Connection, *, on_success: JobSpec | None = None,
               on_complete: JobSpec | None = None, key: str | None = None) -> Batch:
    """Open a batch inside conn's open transaction (no commit). on_success: a job
    (prefork.job()) that starts once the batch is closed and every member is done;
    on_complete: one that starts once it is closed and every member ended, done,
    dead or cancelled. Each runs once. key: as enqueue_workflow()'s."""
    plan = plan_batch(on_success, on_complete)
    if key is not None:
        check_key(key, "workflow key")
    with _flows(conn, "prefork.open_batch()") as flows:
        return Batch(flows.insert_plan(plan, key).id)


def workflow_progress(conn: Connection, workflow_id: int) -> Progress:
    """A workflow's (or batch's) progress, read on conn: its state and its members
    by how they ended (total, done, dead, cancelled, pending). UserError if none."""
    with _flows(conn, "prefork.workflow_progress()") as flows:
        progress: Progress | None = flows.progress(workflow_id)
    if progress is None:
        raise UserError(f"no workflow {workflow_id}")
    return progress
