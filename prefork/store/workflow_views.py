"""The part of the store contract (contract.py) that the dashboard's workflow pages
read: a workflow's row, its members a page at a time (jobs and nested workflows,
in step order), a batch's callbacks, the outermost workflows by state, and the
jobs of a workflow and of those nested in it, for the actions on them.

Both backends run WorkflowReads over their own named statements
(store/<backend>/workflow_view_queries.py); every read is a range of an index:
a workflow's jobs by (workflow_id, workflow_step), its nested ones by
(parent_id, parent_step), the outermost ones by (root_id, state, finished_at).
"""
import abc
import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..jobs import JobStatus
from ..workflows.model import Kind, Node, OnDead, Policy, State
from .views import JobRow

# A page of members starts after this step: every member's step is 0 and up.
BEFORE_MEMBERS = -1
# Workflow ids per statement of a tree's walk.
CHUNK = 500
# The newest moment a stored time can be: the first page of ended workflows starts there.
END_OF_TIME = datetime(9999, 12, 31, 23, 59, 59)


class Outcome(enum.StrEnum):
    """What a member's page may show: members not ended yet, or those that ended so."""
    PENDING = "pending"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


# The states of jobs and of nested workflows that each outcome lists.
JOB_STATES = {Outcome.PENDING: (JobStatus.WAITING, JobStatus.READY, JobStatus.RESERVED),
              Outcome.DONE: (JobStatus.DONE,), Outcome.DEAD: (JobStatus.DEAD,),
              Outcome.CANCELLED: (JobStatus.CANCELLED,)}
WORKFLOW_STATES = {Outcome.PENDING: (State.WAITING, State.RUNNING),
                   Outcome.DONE: (State.DONE,), Outcome.DEAD: (State.DEAD,),
                   Outcome.CANCELLED: (State.CANCELLED,)}
PENDING_STATES = WORKFLOW_STATES[Outcome.PENDING]


@dataclass
class WorkflowRow(Node):
    """One row of prefork_workflows as the pages show it: the bookkeeping's columns,
    and where it sits, its key and its times (naive UTC)."""
    root_id: int | None = None
    key: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def pending(self) -> int:
        """Members not ended yet."""
        return self.total - self.ended


@dataclass(frozen=True)
class Member:
    """A member of a workflow at its step: a job (its row as a Jobs page lists it, with
    no payload) or a nested workflow, never both."""
    step: int
    job: JobRow | None = None
    workflow: WorkflowRow | None = None


@dataclass(frozen=True)
class MemberPage:
    """Members in step order; next_after: the step to pass for the next page, None
    when this page is the last."""
    rows: list[Member]
    next_after: int | None


@dataclass(frozen=True)
class WorkflowPage:
    """Outermost workflows, newest first; next_after: the id to pass for the next page."""
    rows: list[WorkflowRow]
    next_after: int | None


class WorkflowViews(abc.ABC):
    @abc.abstractmethod
    def workflow(self, workflow_id: int) -> WorkflowRow | None:
        """A workflow's row (a nested one's too); None if there is none."""

    @abc.abstractmethod
    def workflow_members(self, workflow_id: int, outcome: Outcome | None, after_step: int,
                         limit: int) -> MemberPage:
        """Up to `limit` members (jobs and nested workflows) at steps after `after_step`
        (BEFORE_MEMBERS: from the first), those of one outcome or all, in step order."""

    @abc.abstractmethod
    def workflow_callbacks(self, workflow_id: int) -> list[JobRow]:
        """A batch's callbacks: on_success (step -1), then on_complete (step -2)."""

    @abc.abstractmethod
    def find_workflows(self, state: State | None, after_id: int | None,
                       limit: int) -> WorkflowPage:
        """Outermost workflows of a state (or all), a page after the one with id
        `after_id`: running and waiting ones newest first, ended ones last ended
        first, all of them by id."""

    @abc.abstractmethod
    def nested_workflows(self, workflow_ids: Sequence[int]) -> list[int]:
        """The ids of the workflows nested directly in these (at most CHUNK)."""

    @abc.abstractmethod
    def workflow_job_ids(self, workflow_ids: Sequence[int], statuses: Sequence[JobStatus],
                         after_id: int, limit: int) -> list[int]:
        """Up to `limit` ids, from after_id up, of the jobs of these workflows (at most
        CHUNK; callbacks too) that are in one of `statuses`."""


# A dialect's (text, params) of an IN (...) list, as store/flows.py's FlowSql.listed.
ListParams = Callable[[str, Sequence[Any]], tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class ViewSql:
    """A dialect's statements of the workflow pages, with named parameters."""
    workflow: str
    member_jobs: str           # {statuses}
    member_workflows: str      # {states}
    callbacks: str
    all_workflows: str
    pending_workflows: str
    ended_workflows: str
    nested: str                # {ids}
    job_ids: str               # {ids} {statuses}
    listed: ListParams


class WorkflowReads(WorkflowViews):
    """WorkflowViews over a dialect's ViewSql: view_rows() runs one read as dicts,
    its times as naive UTC datetimes."""
    view_sql: ViewSql

    @abc.abstractmethod
    def view_rows(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of one read, each a dict of its columns."""

    def workflow(self, workflow_id: int) -> WorkflowRow | None:
        found = self.view_rows(self.view_sql.workflow, {"id": workflow_id})
        return workflow_row(found[0]) if found else None

    def workflow_members(self, workflow_id: int, outcome: Outcome | None, after_step: int,
                         limit: int) -> MemberPage:
        sql = self.view_sql
        statuses, named = sql.listed("status", _states(JOB_STATES, outcome))
        jobs = self.view_rows(sql.member_jobs.format(statuses=statuses),
                              {"id": workflow_id, "after": after_step, "limit": limit + 1,
                               **named})
        states, named = sql.listed("state", _states(WORKFLOW_STATES, outcome))
        nested = self.view_rows(sql.member_workflows.format(states=states),
                                {"id": workflow_id, "after": after_step, "limit": limit + 1,
                                 **named})
        return merged_page([Member(int(row.pop("workflow_step")), job=row) for row in jobs]
                           + [Member(int(row["parent_step"]), workflow=workflow_row(row))
                              for row in nested], limit)

    def workflow_callbacks(self, workflow_id: int) -> list[JobRow]:
        return self.view_rows(self.view_sql.callbacks, {"id": workflow_id})

    def find_workflows(self, state: State | None, after_id: int | None,
                       limit: int) -> WorkflowPage:
        sql, params = self._find_statement(state, after_id)
        found = [workflow_row(row) for row in self.view_rows(sql, {**params, "limit": limit + 1})]
        rows = found[:limit]
        return WorkflowPage(rows, rows[-1].id if len(found) > limit else None)

    def _find_statement(self, state: State | None,
                        after_id: int | None) -> tuple[str, dict[str, Any]]:
        before = {"before": 2 ** 63 - 1 if after_id is None else after_id}
        if state is None:
            return self.view_sql.all_workflows, before
        if state in PENDING_STATES:
            return self.view_sql.pending_workflows, {**before, "state": state.value}
        at: datetime | None = END_OF_TIME
        if after_id is not None:
            anchor = self.workflow(after_id)
            # Gone (pruned) or running again (retried): no place to go on from.
            at = anchor.finished_at if anchor is not None else None
        return self.view_sql.ended_workflows, {**before, "state": state.value, "at": at}

    def nested_workflows(self, workflow_ids: Sequence[int]) -> list[int]:
        ids, named = self.view_sql.listed("parent", list(workflow_ids))
        return [int(row["id"]) for row in self.view_rows(self.view_sql.nested.format(ids=ids),
                                                         named)]

    def workflow_job_ids(self, workflow_ids: Sequence[int], statuses: Sequence[JobStatus],
                         after_id: int, limit: int) -> list[int]:
        ids, named = self.view_sql.listed("workflow", list(workflow_ids))
        states, named_states = self.view_sql.listed("status", [s.value for s in statuses])
        rows = self.view_rows(self.view_sql.job_ids.format(ids=ids, statuses=states),
                              {"after": after_id, "limit": limit, **named, **named_states})
        return [int(row["id"]) for row in rows]


def _states(table: Mapping[Outcome, tuple[enum.StrEnum, ...]],
            outcome: Outcome | None) -> list[str]:
    chosen = table.values() if outcome is None else [table[outcome]]
    return [state.value for states in chosen for state in states]


def merged_page(members: list[Member], limit: int) -> MemberPage:
    """A page of `limit` members from two lists of up to limit + 1 each (jobs, nested
    workflows), both in step order: any member before the page's last is among the
    first limit + 1 of its own list."""
    members.sort(key=lambda member: member.step)
    rows = members[:limit]
    return MemberPage(rows, rows[-1].step if len(members) > limit else None)


def workflow_row(row: dict[str, Any]) -> WorkflowRow:
    """A WorkflowRow of a read's columns (ENUMs as text or bytes)."""
    def word(name: str) -> str:
        value = row[name]
        return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)

    def optional(name: str) -> int | None:
        return None if row[name] is None else int(row[name])

    return WorkflowRow(
        id=int(row["id"]), kind=Kind(word("kind")), state=State(word("state")),
        policy=Policy(word("policy")), on_dead=OnDead(word("on_dead")),
        is_open=bool(row["is_open"]), current_step=int(row["current_step"]),
        total=int(row["total"]), done=int(row["done"]), dead=int(row["dead"]),
        cancelled=int(row["cancelled"]), parent_id=optional("parent_id"),
        parent_step=int(row["parent_step"]), root_id=optional("root_id"),
        key=row["idempotency_key"], created_at=row["created_at"],
        finished_at=row["finished_at"])


def tree_job_ids(store: WorkflowViews, workflow_id: int,
                 statuses: Sequence[JobStatus]) -> Iterator[list[int]]:
    """The ids of the jobs in `statuses` of a workflow and of every workflow nested in
    it, at any depth, in batches of at most CHUNK (each a range of the job index)."""
    level = [workflow_id]
    while level:
        for start in range(0, len(level), CHUNK):
            chunk = level[start:start + CHUNK]
            after = 0
            while batch := store.workflow_job_ids(chunk, statuses, after, CHUNK):
                yield batch
                after = batch[-1] + 1
        level = [child for start in range(0, len(level), CHUNK)
                 for child in store.nested_workflows(level[start:start + CHUNK])]
