"""The workflow statements both backends run, through each one's named SQL
(store/<backend>/workflow_queries.py): on a cursor inside the caller's transaction
(the store's own, or an application's), Flows inserts a planned workflow, adds to
a batch and closes it, gives workflows/advance.py the statements it keeps its books
with, and ends, retries and reads members. Never commits.

A dialect's subclass says how its jobs are inserted (MySQL: many rows a statement)
and what its statements read as parameters besides their own (SQLite: the time).
"""
import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..jobs import JobStatus
from ..workflows.advance import Bookkeeping, End
from ..workflows.model import (ENDS, STOPPED_ERROR, Enqueued, Kind, Node, OnDead, Place, Policy,
                               Progress, State)
from ..workflows.plan import OUTER, JobRow, Plan, plan_members
from ..workflows.spec import Step

Row = Sequence[Any]
# A job to insert and the id of its workflow.
Owned = tuple[JobRow, int]
# (text, params) of an IN (...) list: a dialect's named placeholders for values.
ListParams = Callable[[str, Sequence[Any]], tuple[str, dict[str, Any]]]
# The members retried per transaction when no ids are named.
RETRY_BATCH = 500


@dataclass(frozen=True)
class FlowSql:
    """A dialect's workflow statements, each with named parameters."""
    insert_workflow: str
    workflow_by_key: str
    jobs_of_root: str
    workflow_row: str   # locked to the end of the transaction where rows lock
    save_workflow: str
    release_step: str
    release_members: str
    step_status: str
    child_at: str
    children_after: str
    cancel_waiting: str
    restore_stopped: str
    places: str
    states_of: str
    members_to_retry: str
    member_ids_to_retry: str
    retry_member: str
    progress: str
    place_of: str
    listed: ListParams


def text(value: Any) -> str:
    """An ENUM as text: some MySQL drivers hand it over as bytes."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


class Flows(abc.ABC):
    """The workflow statements on one cursor (workflows.advance.Books among them)."""
    sql: FlowSql

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    @abc.abstractmethod
    def params(self) -> dict[str, Any]:
        """What every statement may read besides its own parameters."""

    @abc.abstractmethod
    def insert_jobs(self, jobs: Sequence[Owned]) -> list[int]:
        """Insert these jobs, in order; their ids, in that order."""

    def run(self, sql: str, **params: Any) -> Any:
        """Execute one statement; the cursor, to read its rows or row count."""
        self.cursor.execute(sql, {**self.params(), **params})
        return self.cursor

    def rows(self, sql: str, **params: Any) -> list[Row]:
        return list(self.run(sql, **params).fetchall())

    def count(self, sql: str, **params: Any) -> int:
        return int(self.run(sql, **params).rowcount)

    # -- workflows.advance.Books ------------------------------------------------------------

    def lock(self, node_id: int) -> Node | None:
        found = self.rows(self.sql.workflow_row, id=node_id)
        return node_of(found[0]) if found else None

    def save(self, node: Node) -> None:
        self.run(self.sql.save_workflow, id=node.id, state=node.state.value,
                 is_open=int(node.is_open), current_step=node.current_step, total=node.total,
                 done=node.done, dead=node.dead, cancelled=node.cancelled)

    def release_jobs(self, node_id: int, step: int | None) -> int:
        if step is None:
            return self.count(self.sql.release_members, id=node_id)
        return self.count(self.sql.release_step, id=node_id, step=step)

    def step_status(self, node_id: int, step: int) -> JobStatus | None:
        found = self.rows(self.sql.step_status, id=node_id, step=step)
        return JobStatus(text(found[0][0])) if found else None

    def child_at(self, node_id: int, step: int) -> int | None:
        found = self.rows(self.sql.child_at, id=node_id, step=step)
        return int(found[0][0]) if found else None

    def children_after(self, node_id: int, step: int) -> list[int]:
        return [int(row[0]) for row in self.rows(self.sql.children_after, id=node_id, step=step)]

    def cancel_jobs(self, node_id: int, after_step: int) -> int:
        return self.count(self.sql.cancel_waiting, id=node_id, step=after_step,
                          stopped=STOPPED_ERROR)

    def restore_jobs(self, node_id: int, after_step: int) -> int:
        return self.count(self.sql.restore_stopped, id=node_id, step=after_step,
                          stopped=STOPPED_ERROR)

    # -- producing -------------------------------------------------------------------------------

    def insert_plan(self, plan: Plan, key: str | None = None, outer: int | None = None) -> Enqueued:
        """Insert a plan's workflows and jobs (a new workflow's, or members added to
        the batch `outer`). A key already taken inserts nothing: the workflow it names."""
        ids: list[int] = []
        for index, row in enumerate(plan.nodes):
            parent = outer if row.parent == OUTER else \
                None if row.parent is None else ids[row.parent]
            root = None if row.parent is None else (ids[0] if outer is None else outer)
            cursor = self.run(self.sql.insert_workflow, root_id=root, parent_id=parent,
                              parent_step=row.parent_step, kind=row.kind.value,
                              state=row.state.value, policy=row.policy.value,
                              on_dead=row.on_dead.value, is_open=int(row.is_open),
                              total=row.total, key=key if index == 0 else None)
            if cursor.rowcount == 0:   # the key is taken: that workflow, nothing inserted
                existing = int(self.rows(self.sql.workflow_by_key, key=key)[0][0])
                return Enqueued(existing, self.jobs_of(existing))
            ids.append(int(cursor.lastrowid))
        owners = [outer if job.node == OUTER else ids[job.node] for job in plan.jobs]
        job_ids = self.insert_jobs([(job, owner) for job, owner in zip(plan.jobs, owners)
                                    if owner is not None])
        return Enqueued(ids[0] if outer is None else outer, job_ids)

    def jobs_of(self, workflow_id: int) -> list[int]:
        """The ids of every job of an outermost workflow, in the order they were enqueued."""
        return [int(row[0]) for row in self.rows(self.sql.jobs_of_root, id=workflow_id)]

    def add_members(self, batch_id: int, steps: Sequence[Step]) -> tuple[list[int], Plan]:
        """Add members to an open batch, released at once: their jobs' ids, and the plan
        inserted. UserError (nothing inserted) when the batch is closed or missing."""
        book = Bookkeeping(self)
        first = book.adding(batch_id, len(steps))
        plan = plan_members(list(steps), first)
        book.save()
        return self.insert_plan(plan, outer=batch_id).job_ids, plan

    def close_batch(self, batch_id: int) -> None:
        """Close a batch: once its members all ended (now, maybe), its callbacks start."""
        book = Bookkeeping(self)
        book.closing(batch_id)
        book.save()

    # -- members that end, and retries -------------------------------------------------------

    def settle(self, ends: Iterable[End]) -> None:
        """Members ended in this transaction (workflow id, step, how): their bookkeeping."""
        listed = list(ends)
        if listed:
            book = Bookkeeping(self)
            book.ended(listed)
            book.save()

    def settle_ids(self, ended: Sequence[tuple[int, JobStatus]]) -> None:
        """Jobs that left reserved, ready or waiting in this transaction, by id (their
        rows locked): the bookkeeping of the members among them that ended."""
        how = {job_id: status for job_id, status in ended if status in ENDS}
        if how:
            names, params = self.sql.listed("id", list(how))
            self.settle([(int(workflow_id), int(step), how[int(job_id)]) for job_id, workflow_id,
                         step in self.rows(self.sql.places.format(ids=names), **params)])

    def settle_returned(self, member_ids: Sequence[int]) -> None:
        """Members a statement just returned (their rows locked before it): those it
        ended, dead or cancelled, move their workflows on."""
        if member_ids:
            names, params = self.sql.listed("id", list(member_ids))
            self.settle_ids([(int(job_id), JobStatus(text(status))) for job_id, status
                             in self.rows(self.sql.states_of.format(ids=names), **params)])

    def retry_members(self, job_ids: Sequence[int] | None, queue: str | None,
                      max_attempts: int | None, states: Sequence[str],
                      after: int = 0) -> tuple[int, int]:
        """Retry dead (or cancelled) members: each ready again, or waiting when its
        workflow has not released its step, its workflow counting it pending again.
        All of job_ids, or the next RETRY_BATCH from id `after` on: (how many, the
        next id to start from)."""
        statuses, params = self.sql.listed("status", states)
        if job_ids is None:
            found = self.rows(self.sql.members_to_retry.format(statuses=statuses), queue=queue,
                              after=after, batch=RETRY_BATCH, **params)
        else:
            ids, named = self.sql.listed("id", job_ids)
            found = self.rows(self.sql.member_ids_to_retry.format(statuses=statuses, ids=ids),
                              queue=queue, **params, **named)
        book = Bookkeeping(self)
        for job_id, status, workflow_id, step in found:
            now = book.retried(int(workflow_id), int(step), JobStatus(text(status)))
            self.run(self.sql.retry_member, id=job_id, status=now.value,
                     max_attempts=max_attempts)
        book.save()
        return len(found), int(found[-1][0]) + 1 if found else after

    # -- reading -------------------------------------------------------------------------------

    def progress(self, workflow_id: int) -> Progress | None:
        found = self.rows(self.sql.progress, id=workflow_id)
        if not found:
            return None
        node_id, kind, state, total, done, dead, cancelled, is_open = found[0]
        return Progress(int(node_id), Kind(text(kind)), State(text(state)), int(total),
                        int(done), int(dead), int(cancelled), bool(is_open))

    def place(self, job_id: int) -> Place | None:
        found = self.rows(self.sql.place_of, id=job_id)
        if not found:
            return None
        workflow_id, kind, step, root_id = found[0]
        return Place(int(workflow_id), Kind(text(kind)), int(step), int(root_id))


def node_of(row: Row) -> Node:
    """A model.Node of a workflow row (workflow_row's columns)."""
    (node_id, parent_id, parent_step, kind, state, policy, on_dead, is_open, current_step,
     total, done, dead, cancelled) = row
    return Node(int(node_id), None if parent_id is None else int(parent_id), int(parent_step),
                Kind(text(kind)), State(text(state)), Policy(text(policy)),
                OnDead(text(on_dead)), bool(is_open), int(current_step), int(total),
                int(done), int(dead), int(cancelled))
