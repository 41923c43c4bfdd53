"""What an application writes to describe a workflow: a job to run, a chain of
steps, a group of members with a callback. Values only, validated when made:
nothing here touches a database (api.py enqueues them).

    flow = prefork.chain(
        prefork.job("order.charge", {"order": 7}),
        prefork.group([prefork.job("mail.send", {"to": a}) for a in addresses],
                      then=prefork.job("order.close", {"order": 7})),
    )
"""
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar, Union

from ..errors import UserError
from ..jobs import NewJob, Payload, new_job
from .model import OnDead, Policy


@dataclass(frozen=True)
class JobSpec:
    """One job of a workflow, validated (prefork.job() makes it)."""
    new_job: NewJob


@dataclass(frozen=True)
class Chain:
    """Steps run one after the other (prefork.chain() makes it)."""
    steps: tuple["Step", ...]
    on_dead: OnDead = OnDead.WAIT


@dataclass(frozen=True)
class Group:
    """Members run at once, then `then` (prefork.group() makes it)."""
    members: tuple["Step", ...]
    then: Union["Step", None] = None
    policy: Policy = Policy.DONE


# Anything that can be a step of a chain or a member of a group.
Step = Union[JobSpec, Chain, Group]
# What can be enqueued as a workflow of its own.
Flow = Union[Chain, Group]


def job(job_type: str, payload: Payload = None, *, queue: str = "default", priority: int = 0,
        max_attempts: int = 5, concurrency_key: str | None = None,
        max_payload_bytes: int = 65536) -> JobSpec:
    """A job of a workflow: the arguments of prefork.enqueue() but those a workflow
    decides (when it runs: no delay or run_at; one job per workflow enqueued: no key
    of its own, the workflow takes one). A one-line UserError for bad arguments."""
    return JobSpec(new_job(job_type, payload, queue=queue, priority=priority,
                           max_attempts=max_attempts, max_payload_bytes=max_payload_bytes,
                           concurrency_key=concurrency_key))


def chain(*steps: Step, on_dead: OnDead | str = OnDead.WAIT) -> Chain:
    """Run the steps one after the other: each starts once the one before it is done
    (a group step: once it passed). A step that ends dead or cancelled stops the chain:
    the steps after it wait (on_dead="wait", the default; retrying the step resumes
    the chain) or are cancelled (on_dead="cancel"; retrying the step brings them back).
    A step may be a job, a group or a chain."""
    policy = _choice(OnDead, on_dead, "on_dead")
    flat: list[Step] = []
    for step in steps_of(steps, "a chain's step"):
        # A chain inside a chain with the same policy is the same chain.
        flat.extend(step.steps if isinstance(step, Chain) and step.on_dead is policy else [step])
    if not flat:
        raise UserError("a chain needs at least one step")
    return Chain(tuple(flat), policy)


def group(members: Iterable[Step], *, then: Step | None = None,
          policy: Policy | str = Policy.DONE) -> Group:
    """Run the members at once; `then` (a job, a chain or a group) is enqueued with them
    and starts once, when the group passes: when every member is done (policy="done",
    the default) or when every member has ended, done, dead or cancelled
    (policy="ended"). A member may be a job, a chain or a group."""
    chosen = _choice(Policy, policy, "policy")
    listed = tuple(steps_of(members, "a group's member"))
    if not listed:
        raise UserError("a group needs at least one member")
    if then is not None:
        steps_of([then], "a group's then")
    return Group(listed, then, chosen)


def steps_of(steps: Iterable[object], what: str) -> list[Step]:
    """The steps given, checked: each made with job(), chain() or group()."""
    if isinstance(steps, (str, bytes, dict)):
        raise UserError(f"{what} is made with prefork.job(), prefork.chain() or prefork.group()")
    found = list(steps)
    for step in found:
        if not isinstance(step, (JobSpec, Chain, Group)):
            raise UserError(f"{what} is made with prefork.job(), prefork.chain() or "
                            f"prefork.group(), not {type(step).__name__}")
    return found  # type: ignore[return-value]   # checked above


Choice = TypeVar("Choice", OnDead, Policy)


def _choice(kind: type[Choice], value: Choice | str, name: str) -> Choice:
    try:
        return kind(value)
    except ValueError:
        raise UserError(f"{name} must be one of {', '.join(item.value for item in kind)}, "
                        f"not {value!r}") from None
