"""The part of the store contract (contract.py) that workflows use: enqueueing one,
a batch's members and close, reading progress and a job's place (store/flows.py
says how both backends do it). The paths that end jobs carry a member's
bookkeeping themselves; members_apart() sorts their leases."""
import abc
from collections.abc import Sequence

from ..jobs import Lease, member_token
from ..workflows.model import Enqueued, Place, Progress
from ..workflows.plan import Plan
from ..workflows.spec import Step


def members_apart(leases: Sequence[Lease]) -> tuple[list[Lease], list[Lease]]:
    """(the leases of workflow members, the others): a member's end carries its
    workflow's bookkeeping, a plain job's statements stay as they are."""
    members = [lease for lease in leases if member_token(lease[1])]
    return members, [lease for lease in leases if not member_token(lease[1])]


class WorkflowStore(abc.ABC):
    @abc.abstractmethod
    def enqueue_workflow(self, plan: Plan, key: str | None = None) -> Enqueued:
        """Insert a planned workflow (or batch) in one transaction and commit; a key
        already taken inserts nothing and answers with the workflow it names."""

    @abc.abstractmethod
    def add_to_batch(self, batch_id: int, steps: Sequence[Step]) -> list[int]:
        """Add members to an open batch, ready at once, and commit: their jobs' ids.
        UserError when the batch is closed or missing."""

    @abc.abstractmethod
    def close_batch(self, batch_id: int) -> None:
        """Close a batch and commit: its callbacks start once its members all ended
        (at once, if they have)."""

    @abc.abstractmethod
    def workflow_progress(self, workflow_id: int) -> Progress | None:
        """A workflow's members by how they ended, and its state; None if none."""

    @abc.abstractmethod
    def workflow_place(self, job_id: int) -> Place | None:
        """The workflow a job is a member (or a batch's callback) of, and its step."""
