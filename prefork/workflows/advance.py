"""A workflow's bookkeeping: what a member's end, a retry, a batch's new members and
its close do to the workflows above them. Pure: it runs on a store's Books, inside
the transaction that ends (or retries, or adds) the member, so that both commit
together or not at all. That is the whole guarantee: a callback or a chain's next
step is released (waiting -> ready) in the transaction of the end that makes its
condition true, once, since only a waiting job is released; no sweep looks later.

Every workflow row read is locked until the commit, and written back before it:
two ends in one workflow take turns on its row (on a cluster with writers on
several nodes, they certify against each other there, and one is retried).
"""
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Protocol

from ..errors import UserError
from ..jobs import JobStatus
from .model import ENDS, ON_COMPLETE_STEP, ON_SUCCESS_STEP, Kind, Node, OnDead, Policy, State

# A member's end: (its workflow's id, its step there, how it ended).
End = tuple[int, int, JobStatus]


class Books(Protocol):
    """A store's statements on the workflow tables, in the caller's open transaction."""

    def lock(self, node_id: int) -> Node | None:
        """The workflow row, locked (None: it was pruned)."""

    def save(self, node: Node) -> None:
        """Write back its state, step and counters."""

    def release_jobs(self, node_id: int, step: int | None) -> int:
        """Waiting jobs of the workflow at `step` (None: every member, step 0 and up)
        made ready now; how many."""

    def step_status(self, node_id: int, step: int) -> JobStatus | None:
        """The state of the job at a step (None: no job there)."""

    def child_at(self, node_id: int, step: int) -> int | None:
        """The id of the nested workflow at a step, or None."""

    def children_after(self, node_id: int, step: int) -> list[int]:
        """The ids of the nested workflows at steps after `step`, in step order."""

    def cancel_jobs(self, node_id: int, after_step: int) -> int:
        """Waiting members at steps after `after_step` cancelled (STOPPED_ERROR); how many."""

    def restore_jobs(self, node_id: int, after_step: int) -> int:
        """Those cancel_jobs() cancelled, at steps after `after_step`, waiting again."""


class Bookkeeping:
    """The bookkeeping of one transaction: each workflow row is locked once, kept
    here while the events of the transaction change it, and written by save()."""

    def __init__(self, books: Books) -> None:
        self.books = books
        self.nodes: dict[int, Node | None] = {}

    def save(self) -> None:
        """Write back every workflow row read (each changed: an event changes counters)."""
        for node in self.nodes.values():
            if node is not None:
                self.books.save(node)

    def node(self, node_id: int) -> Node | None:
        if node_id not in self.nodes:
            self.nodes[node_id] = self.books.lock(node_id)
        return self.nodes[node_id]

    # -- a member ended -------------------------------------------------------------------

    def ended(self, ends: Iterable[End]) -> None:
        """Members ended (each once: its row left reserved, ready or waiting in this
        transaction): count them, and move their workflows on. Workflows are locked
        in id order, so that two transactions lock them in the same order."""
        for node_id, items in groupby(sorted(ends), key=lambda end: end[0]):
            self._members_ended(node_id, [(step, outcome) for _, step, outcome in items])

    def _members_ended(self, node_id: int, ends: Sequence[tuple[int, JobStatus | State]]) -> None:
        node = self.node(node_id)
        if node is None:
            return
        for step, outcome in ends:
            node.count(outcome, 1)
        if node.kind is Kind.CHAIN:
            for step, outcome in ends:
                # A later step that ended waiting (cancelled) stops the chain when reached.
                if step == node.current_step and node.state is State.RUNNING:
                    self._step_ended(node, step, JobStatus(outcome.value))
        else:
            self._group_check(node)

    def _step_ended(self, chain: Node, step: int, outcome: JobStatus) -> None:
        if outcome is not JobStatus.DONE:
            self._finish(chain, State(outcome.value))
            if chain.on_dead is OnDead.CANCEL:
                self._cancel_after(chain, step)
        elif step == chain.total - 1:
            self._finish(chain, State.DONE)
        else:
            chain.current_step = step + 1
            self._release_step(chain, step + 1)

    def _release_step(self, chain: Node, step: int) -> None:
        child = self.books.child_at(chain.id, step)
        if child is not None:
            self._release_node(child)
        elif not self.books.release_jobs(chain.id, step):
            # Not waiting: cancelled while it waited (counted then), or pruned since.
            status = self.books.step_status(chain.id, step) or JobStatus.CANCELLED
            if status in ENDS:
                self._step_ended(chain, step, status)

    def _release_node(self, node_id: int) -> None:
        node = self.node(node_id)
        if node is None or node.state is not State.WAITING:
            return
        node.state = State.RUNNING
        if node.kind is Kind.CHAIN:
            node.current_step = 0
            self._release_step(node, 0)
            return
        self.books.release_jobs(node.id, None)
        for child in self.books.children_after(node.id, -1):
            self._release_node(child)
        self._group_check(node)

    def _group_check(self, group: Node) -> None:
        """A running, closed group whose members all ended: its callbacks (a batch's)
        start, and it ends, passed or not by its policy."""
        if group.state is not State.RUNNING or group.is_open or group.ended < group.total:
            return
        self.books.release_jobs(group.id, ON_COMPLETE_STEP)
        if group.done == group.total:
            self.books.release_jobs(group.id, ON_SUCCESS_STEP)
        if group.policy is Policy.ENDED or group.done == group.total:
            self._finish(group, State.DONE)
        else:
            self._finish(group, State.DEAD if group.dead else State.CANCELLED)

    def _finish(self, node: Node, state: State) -> None:
        node.state = state
        if node.parent_id is not None:
            self._members_ended(node.parent_id, [(node.parent_step, state)])

    def _cancel_after(self, chain: Node, step: int) -> None:
        """A chain stopped at `step` (on_dead=cancel): its waiting later steps end
        cancelled, nested workflows with all their waiting jobs."""
        chain.cancelled += self.books.cancel_jobs(chain.id, step)
        for child in self.books.children_after(chain.id, step):
            chain.cancelled += self._cancel_node(child)

    def _cancel_node(self, node_id: int) -> int:
        node = self.node(node_id)
        if node is None or node.state is not State.WAITING:
            return 0
        node.state = State.CANCELLED
        node.cancelled += self.books.cancel_jobs(node.id, -1)
        for child in self.books.children_after(node.id, -1):
            node.cancelled += self._cancel_node(child)
        return 1

    # -- a member retried ---------------------------------------------------------------------

    def retried(self, node_id: int, step: int, was: JobStatus) -> JobStatus:
        """A member that ended `was` (dead or cancelled) is retried: its workflow counts
        it pending again, and reopens when it had stopped for it (and so on up). The
        job's new state: ready if its workflow has released its step, else waiting."""
        node = self.node(node_id)
        if node is None:
            return JobStatus.READY
        self._reopen(node, step, was)
        return JobStatus.READY if self._released(node, step) else JobStatus.WAITING

    def _reopen(self, node: Node, step: int, was: JobStatus | State) -> None:
        node.count(was, -1)
        stopped_here = node.kind is not Kind.CHAIN or step == node.current_step
        if node.state not in (State.DEAD, State.CANCELLED) or not stopped_here:
            return   # still running, passed (its policy allowed the end), or stopped elsewhere
        had = node.state
        node.state = State.RUNNING if self._node_released(node) else State.WAITING
        if node.kind is Kind.CHAIN and node.on_dead is OnDead.CANCEL:
            self._restore_after(node, step)
        if node.parent_id is not None:
            parent = self.node(node.parent_id)
            if parent is not None:
                self._reopen(parent, node.parent_step, had)

    def _restore_after(self, chain: Node, step: int) -> None:
        """The later steps the chain's stop cancelled wait again."""
        chain.cancelled -= self.books.restore_jobs(chain.id, step)
        for child in self.books.children_after(chain.id, step):
            chain.cancelled -= self._restore_node(child)

    def _restore_node(self, node_id: int) -> int:
        """A nested workflow the stop cancelled (or one a retry of its own member made
        wait already) waits again, with what the stop cancelled in it; 1 if it had
        counted as cancelled in its parent."""
        node = self.node(node_id)
        if node is None or node.state not in (State.CANCELLED, State.WAITING):
            return 0
        counted = node.state is State.CANCELLED
        node.state = State.WAITING
        node.cancelled -= self.books.restore_jobs(node.id, -1)
        for child in self.books.children_after(node.id, -1):
            node.cancelled -= self._restore_node(child)
        return int(counted)

    def _released(self, node: Node, step: int) -> bool:
        """Whether the workflow has released its step (a group: all of them)."""
        if node.kind is Kind.CHAIN and step > node.current_step:
            return False
        return self._node_released(node)

    def _node_released(self, node: Node) -> bool:
        if node.parent_id is None:
            return True
        parent = self.node(node.parent_id)
        return parent is None or self._released(parent, node.parent_step)

    # -- a batch ----------------------------------------------------------------------------

    def adding(self, node_id: int, count: int) -> int:
        """A batch takes `count` members: the step of the first. UserError when it is
        closed or is no batch."""
        node = self.node(node_id)
        if node is None or node.kind is not Kind.BATCH:
            raise UserError(f"no batch {node_id}")
        if not node.is_open:
            raise UserError(f"batch {node_id} is closed: it takes no more members")
        first, node.total = node.total, node.total + count
        return first

    def closing(self, node_id: int) -> None:
        """A batch takes no more members: once they all ended, its callbacks start (now,
        if they have)."""
        node = self.node(node_id)
        if node is None or node.kind is not Kind.BATCH:
            raise UserError(f"no batch {node_id}")
        node.is_open = False
        self._group_check(node)

