"""Workflows in the store's model-checked property (store_model.py): the model of
chains, groups and batches, and the rules that enqueue them, add to a batch and
close it. Every other rule of the machine (claims, completions, failures,
hand-backs, expiry, pruning, cancels, retries, discards) also lands on workflow
jobs; after each step the model moves its workflows on and the check compares
every job's state with the store's.

The model is written from the contract, not from the store's bookkeeping: a
waiting job is released once its place is reached (its chain's steps before it
passed, its group reached), computed from the jobs' states after every step; a
workflow that passed stays passed (a retry of a group's member after its
callback ran starts nothing again); a chain with on_dead="cancel" cancels its
waiting later steps when a reached step ends without passing, and brings them
back when that step is retried. A released job is never released again: a
callback that ran twice, or early, is a job whose state differs.
"""
from dataclasses import dataclass, field
from datetime import datetime

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from store_model_state import CANCELLED, DEAD, READY, Model

import prefork
from prefork.jobs import JobStatus
from prefork.workflows.plan import plan_batch, plan_flow

DONE, WAITING = JobStatus.DONE, JobStatus.WAITING
ENDED = (DONE, DEAD, CANCELLED)
KINDS = ("c.a", "c.b")   # job types of workflow jobs (any queue of the machine's)
RELEASED = datetime(9000, 1, 1)   # the available_at of a job released during a step


@dataclass
class Flow:
    """A workflow of the model: its children are job ids or Flows."""
    kind: str                      # chain, group or batch
    children: list
    policy: str = "done"
    on_dead: str = "wait"
    open: bool = False
    hooks: dict = field(default_factory=dict)   # batch: {"success": id, "complete": id}
    passed: bool = False           # sticky: a workflow that passed stays passed
    stopped_at: int | None = None  # a chain with on_dead="cancel" stopped at this step
    id: int = 0                    # the store's, for batches


# A workflow to enqueue, drawn: a leaf is a job (its queue); a chain or group
# nests up to two levels; group policy, chain on_dead and a group's callback vary.
LEAF = st.sampled_from(("a", "b", "c")).map(lambda queue: ("job", queue))


def _nodes(children):
    chain = st.tuples(st.just("chain"), st.lists(children, min_size=1, max_size=3),
                      st.sampled_from(("wait", "cancel")))
    group = st.tuples(st.just("group"), st.lists(children, min_size=1, max_size=3),
                      st.sampled_from(("done", "ended")), st.one_of(st.none(), LEAF))
    return chain | group


SHAPES = st.recursive(LEAF, _nodes, max_leaves=6).filter(lambda shape: shape[0] != "job")


class FlowModel:
    """The model's workflows and the step that moves them on."""

    def __init__(self, model: Model):
        self.model = model
        self.flows = []
        self.stopped = set()    # job ids a chain's stop cancelled
        self.released = set()   # job ids released since the last check

    def status(self, job_id):
        job = self.model.jobs.get(job_id)
        return DEAD if job is None else job.status   # a discarded member counts dead

    def settle(self):
        """Move every workflow on until nothing changes."""
        for _ in range(20):
            before = self._states()
            for flow in self.flows:
                self._walk(flow, True, apply=True)
            if self._states() == before:
                return
        raise AssertionError("the workflow model does not settle")

    def _states(self):
        return [(job.id, job.status) for job in self.model.jobs.values()]

    def reached(self, job_id):
        """Whether the job's place in its workflow is reached (a retry makes it ready)."""
        found = set()
        for flow in self.flows:
            self._walk(flow, True, apply=False, found=found)
        return job_id in found

    def _visit(self, child, reached, apply, found):
        """(ended, passed) of a child; a waiting job reached is released."""
        if isinstance(child, Flow):
            return self._walk(child, reached, apply, found)
        if reached:
            found.add(child)
            if apply and self.status(child) == WAITING:
                self._release(child)
        status = self.status(child)
        return status in ENDED, status == DONE

    def _walk(self, flow, reached, apply, found=None):
        found = found if found is not None else set()
        if flow.kind == "chain":
            ok, stop = reached, None
            for step, child in enumerate(flow.children):
                ended, passed = self._visit(child, ok, apply, found)
                if ok and not passed:
                    ok, stop = False, step if ended else None
            if apply and flow.on_dead == "cancel":
                self._stop(flow, stop)
            if apply and reached and ok:
                flow.passed = True
            return flow.passed or stop is not None, flow.passed
        ends = [self._visit(child, reached, apply, found) for child in flow.children]
        ended = not flow.open and all(end for end, _ in ends)
        if reached and ended:
            everyone = all(passed for _, passed in ends)
            if apply:
                self._release_hook(flow, "complete")
                if everyone:
                    self._release_hook(flow, "success")
            if apply and (flow.policy == "ended" or everyone):
                flow.passed = True
        return ended, flow.passed

    def _release_hook(self, flow, name):
        job_id = flow.hooks.get(name)
        if job_id is not None and self.status(job_id) == WAITING:
            self._release(job_id)

    def _stop(self, chain, stop):
        """on_dead="cancel": the stop cancels the waiting later steps; its step's
        retry brings back what it cancelled."""
        if stop is not None and chain.stopped_at is None:
            chain.stopped_at = stop
            for job_id in self._jobs(chain.children[stop + 1:]):
                if self.status(job_id) == WAITING:
                    self._set(job_id, CANCELLED)
                    self.stopped.add(job_id)
        elif stop is None and chain.stopped_at is not None:
            for job_id in self._jobs(chain.children[chain.stopped_at + 1:]):
                if job_id in self.stopped and self.status(job_id) == CANCELLED:
                    self._set(job_id, WAITING)
                self.stopped.discard(job_id)
            chain.stopped_at = None

    def _jobs(self, children):
        for child in children:
            if isinstance(child, Flow):
                yield from self._jobs(child.children)
            elif child in self.model.jobs:
                yield child

    def _release(self, job_id):
        """Ready now: the store writes its available_at now, read back after the step;
        meanwhile it sorts after every job ready before it."""
        self._set(job_id, READY)
        self.model.jobs[job_id].available_at = RELEASED
        self.released.add(job_id)

    def _set(self, job_id, status):
        job = self.model.jobs[job_id]
        job.status, job.due = status, True

    def revive(self, job_id):
        """A retried member: ready if its place is reached, else waiting."""
        self.stopped.discard(job_id)
        if self.member(job_id) and not self.reached(job_id):
            self._set(job_id, WAITING)

    def member(self, job_id):
        return any(job_id in self._jobs([flow]) for flow in self.flows)


def build(shape, leaves):
    """(spec, Flow or leaf) of a drawn shape; each job is appended to `leaves` (its
    NewJob, in the order listed: the order the store answers ids in) and stands in the
    Flow as its index there, until place() puts the store's ids in."""
    kind = shape[0]
    if kind == "job":
        spec = prefork.job(KINDS[len(leaves) % 2], {"leaf": len(leaves)}, queue=shape[1])
        leaves.append(spec.new_job)
        return spec, len(leaves) - 1
    built = [build(child, leaves) for child in shape[1]]
    specs, children = [spec for spec, _ in built], [child for _, child in built]
    if kind == "chain":
        return prefork.chain(*specs, on_dead=shape[2]), Flow("chain", children,
                                                             on_dead=shape[2])
    group = Flow("group", children, policy=shape[2])
    if shape[3] is None:
        return prefork.group(specs, policy=shape[2]), group
    then_spec, then = build(shape[3], leaves)
    return prefork.group(specs, then=then_spec, policy=shape[2]), Flow("chain", [group, then])


def place(flow, job_ids):
    """The Flow (or leaf) with the store's job ids in place of leaf indexes."""
    if isinstance(flow, Flow):
        flow.children = [place(child, job_ids) for child in flow.children]
        return flow
    return job_ids[flow]


class WorkflowRules:
    """The machine's rules that make workflows (mixed into store_model.StoreMachine,
    which runs FlowModel.settle() after every step)."""

    @rule(shape=SHAPES)
    def enqueue_workflow(self, shape):
        leaves = []
        spec, flow = build(shape, leaves)
        enqueued = self.store.enqueue_workflow(plan_flow(spec))
        assert len(enqueued.job_ids) == len(leaves), "a workflow's jobs"
        self._add_jobs(enqueued.job_ids, leaves)
        self.flows.flows.append(place(flow, enqueued.job_ids))
        self.tally["workflows"] += 1

    def _add_jobs(self, job_ids, new_jobs):
        """The new jobs in the model, all waiting until the step's settle releases them."""
        for job_id, new in zip(job_ids, new_jobs, strict=True):
            self.model.add(job_id, new)
            self.model.jobs[job_id].status = WAITING

    @rule(success=st.booleans(), complete=st.booleans())
    def open_batch(self, success, complete):
        callbacks = {name: prefork.job("c.b", {"callback": name}, queue=queue)
                     for name, queue, wanted in (("success", "b", success),
                                                 ("complete", "c", complete)) if wanted}
        enqueued = self.store.enqueue_workflow(plan_batch(callbacks.get("success"),
                                                          callbacks.get("complete")))
        batch = Flow("batch", [], open=True, id=enqueued.id,
                     hooks=dict(zip(callbacks, enqueued.job_ids, strict=True)))
        self._add_jobs(enqueued.job_ids, [spec.new_job for spec in callbacks.values()])
        self.flows.flows.append(batch)
        self.tally["batches"] += 1

    def _open_batches(self):
        return [flow for flow in self.flows.flows if flow.kind == "batch" and flow.open]

    @precondition(lambda self: self._open_batches())
    @rule(index=st.integers(0, 100), shapes=st.lists(st.one_of(LEAF, SHAPES), min_size=0,
                                                     max_size=2), close=st.booleans())
    def add_to_batch(self, index, shapes, close):
        batch = self._open_batches()[index % len(self._open_batches())]
        leaves = []
        built = [build(shape, leaves) for shape in shapes]
        job_ids = self.store.add_to_batch(batch.id, [spec for spec, _ in built])
        self._add_jobs(job_ids, leaves)
        batch.children += [place(child, job_ids) for _, child in built]
        if close:
            self.store.close_batch(batch.id)
            batch.open = False
            self.tally["batches closed"] += 1
