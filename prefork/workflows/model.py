"""What a workflow is, as the database keeps it: its kinds, states and policies,
and one row of prefork_workflows as the bookkeeping reads and writes it."""
import enum
from dataclasses import dataclass
from typing import NamedTuple

from ..jobs import JobStatus

# A batch's callbacks have these workflow_steps (a member's step is 0 and up):
# released by the batch's end, they run as plain jobs.
ON_SUCCESS_STEP = -1
ON_COMPLETE_STEP = -2
# last_error of a waiting job that its chain's stop cancelled (on_dead="cancel"): a
# retry of the step that stopped the chain makes it wait again, not a job an
# operator cancelled.
STOPPED_ERROR = "workflow stopped"
# How a member may end: the counters of its workflow.
ENDS = (JobStatus.DONE, JobStatus.DEAD, JobStatus.CANCELLED)


class Kind(enum.StrEnum):
    """What a workflow row is."""
    CHAIN = "chain"   # its steps one after the other: a step starts when the one before is done
    GROUP = "group"   # its members at once
    BATCH = "batch"   # a group that takes members while open, with on_success/on_complete


class State(enum.StrEnum):
    """Where a workflow is. It ends as its members do: done, dead or cancelled."""
    WAITING = "waiting"       # not released yet (a later step of a chain)
    RUNNING = "running"
    DONE = "done"             # passed: every step done, or a group's policy met
    DEAD = "dead"             # stopped by a member that ended dead
    CANCELLED = "cancelled"   # stopped by a member that ended cancelled (or by its chain)


ENDED_STATES = (State.DONE, State.DEAD, State.CANCELLED)


class Policy(enum.StrEnum):
    """When a group passes, and its callback (then=) runs."""
    DONE = "done"     # every member done
    ENDED = "ended"   # every member ended: done, dead or cancelled


class OnDead(enum.StrEnum):
    """What a chain does with its later steps when a step ends dead or cancelled."""
    WAIT = "wait"       # they wait: a retry of the step resumes the chain
    CANCEL = "cancel"   # they are cancelled (and wait again if that step is retried)


@dataclass
class Node:
    """One row of prefork_workflows (locked by the transaction that reads it)."""
    id: int
    parent_id: int | None
    parent_step: int
    kind: Kind
    state: State
    policy: Policy
    on_dead: OnDead
    is_open: bool
    current_step: int
    total: int
    done: int = 0
    dead: int = 0
    cancelled: int = 0

    @property
    def ended(self) -> int:
        """Members that ended: done, dead or cancelled."""
        return self.done + self.dead + self.cancelled

    def count(self, outcome: JobStatus | State, delta: int) -> None:
        """Add delta to the counter of a member's end."""
        name = JobStatus(outcome.value).value
        setattr(self, name, getattr(self, name) + delta)


class Progress(NamedTuple):
    """A workflow's progress: its members (jobs and nested workflows) by how they
    ended. pending = total - done - dead - cancelled."""
    id: int
    kind: Kind
    state: State
    total: int
    done: int
    dead: int
    cancelled: int
    is_open: bool

    @property
    def pending(self) -> int:
        return self.total - self.done - self.dead - self.cancelled


class Place(NamedTuple):
    """Where a job is in a workflow: the workflow it is a member of (and that one's
    kind), its step there (ON_SUCCESS_STEP, ON_COMPLETE_STEP: a batch's callback),
    and the outermost workflow."""
    workflow_id: int
    kind: Kind
    step: int
    root_id: int


class Enqueued(NamedTuple):
    """A workflow enqueued (or the one its key named already): its id, and its jobs'
    ids in the order the application listed them (a group's `then` after its members)."""
    id: int
    job_ids: list[int]
