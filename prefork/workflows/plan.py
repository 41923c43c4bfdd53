"""A workflow as rows to insert: its workflows (the outermost one and each nested
chain or group) and its jobs, each in its place and state. Pure: the stores insert
a Plan on the caller's cursor (store/<backend>/workflows.py).

What starts at once is released here already: the outermost workflow runs, a
chain's first step and a group's members are ready (or running, for a nested
workflow); every other job waits for its workflow's bookkeeping to release it.
"""
from dataclasses import dataclass, field

from ..errors import UserError
from ..jobs import JobStatus, NewJob
from .model import ON_COMPLETE_STEP, ON_SUCCESS_STEP, Kind, OnDead, Policy, State
from .spec import Chain, Flow, Group, JobSpec, Step

# A plan's reference to the workflow it adds members to (a batch's add()): its id is
# known only to the store.
OUTER = -1
# Jobs in one workflow enqueued at once: a bound on one transaction's size.
MAX_JOBS = 100_000


@dataclass(frozen=True)
class NodeRow:
    """A workflow row to insert. parent: the index of its parent in Plan.nodes (None:
    the outermost one; OUTER: the workflow a batch's add() adds to)."""
    parent: int | None
    parent_step: int
    kind: Kind
    state: State
    policy: Policy = Policy.DONE
    on_dead: OnDead = OnDead.WAIT
    total: int = 0
    is_open: bool = False


@dataclass(frozen=True)
class JobRow:
    """A job to insert: the index of its workflow in Plan.nodes (or OUTER), its step
    there, and whether it is ready or waits."""
    node: int
    step: int
    status: JobStatus
    new_job: NewJob


@dataclass
class Plan:
    """The rows of a workflow, parents before children; jobs in the order the
    application listed them."""
    nodes: list[NodeRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)

    def add_node(self, row: NodeRow) -> int:
        self.nodes.append(row)
        return len(self.nodes) - 1

    def ready_jobs(self) -> list[NewJob]:
        """The jobs that are ready once inserted (to ring their queues' workers)."""
        return [job.new_job for job in self.jobs if job.status is JobStatus.READY]


def plan_flow(flow: Flow) -> Plan:
    """The rows of a new workflow: its outermost row first, running."""
    if not isinstance(flow, (Chain, Group)):
        raise UserError("a workflow is made with prefork.chain() or prefork.group()")
    plan = Plan()
    _place(plan, flow, None, 0, released=True)
    _check_size(plan)
    return plan


def plan_batch(on_success: JobSpec | None, on_complete: JobSpec | None) -> Plan:
    """The rows of a new, open batch: its row and its callbacks, which wait."""
    plan = Plan()
    node = plan.add_node(NodeRow(None, 0, Kind.BATCH, State.RUNNING, is_open=True))
    for step, callback in ((ON_SUCCESS_STEP, on_success), (ON_COMPLETE_STEP, on_complete)):
        if callback is not None:
            if not isinstance(callback, JobSpec):
                raise UserError("a batch's callback is made with prefork.job()")
            plan.jobs.append(JobRow(node, step, JobStatus.WAITING, callback.new_job))
    return plan


def plan_members(steps: list[Step], first_step: int) -> Plan:
    """The rows of members added to a running batch, its steps from first_step on."""
    plan = Plan()
    for offset, step in enumerate(steps):
        _place(plan, step, OUTER, first_step + offset, released=True)
    _check_size(plan)
    return plan


def _place(plan: Plan, step: Step, parent: int | None, place: int, released: bool) -> None:
    """Add `step` at `place` of the workflow `parent` (an index, OUTER, or None for
    the outermost), released (ready, running) or waiting."""
    if isinstance(step, JobSpec):
        assert parent is not None, "a job alone is not a workflow"
        status = JobStatus.READY if released else JobStatus.WAITING
        plan.jobs.append(JobRow(parent, place, status, step.new_job))
        return
    if isinstance(step, Group) and step.then is not None:
        # A group with a callback is a chain of the group and its callback.
        step = Chain((Group(step.members, None, step.policy), step.then))
    state = State.RUNNING if released else State.WAITING
    if isinstance(step, Chain):
        node = plan.add_node(NodeRow(parent, place, Kind.CHAIN, state, on_dead=step.on_dead,
                                     total=len(step.steps)))
        for index, member in enumerate(step.steps):
            _place(plan, member, node, index, released and index == 0)
        return
    node = plan.add_node(NodeRow(parent, place, Kind.GROUP, state, policy=step.policy,
                                 total=len(step.members)))
    for index, member in enumerate(step.members):
        _place(plan, member, node, index, released)


def _check_size(plan: Plan) -> None:
    if len(plan.jobs) > MAX_JOBS:
        raise UserError(f"a workflow enqueued at once has at most {MAX_JOBS} jobs, "
                        f"not {len(plan.jobs)}: enqueue a batch and add to it")
