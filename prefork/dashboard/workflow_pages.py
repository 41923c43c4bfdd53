"""The workflow pages (GET only): the outermost workflows by state, and one workflow
with its progress, its callbacks and its members by outcome, a page at a time in
step order. Each is one or a few index ranges of the store's workflow reads
(store/workflow_views.py); the actions on a workflow are in workflow_actions.py."""
from typing import Any

from werkzeug.exceptions import BadRequest, NotFound

from ..store.contract import Store
from ..store.workflow_views import (BEFORE_MEMBERS, JOB_STATES, PENDING_STATES, Member,
                                    Outcome, WorkflowRow)
from ..workflows.model import ON_COMPLETE_STEP, ON_SUCCESS_STEP, Kind, State
from . import data
from .site import Site
from .web import MAX_JOB_ID, Request, Response, redirect

# The states the list's tabs name: an outermost workflow runs from the start.
LISTED_STATES = (State.RUNNING, State.DONE, State.DEAD, State.CANCELLED)
CALLBACK_NAMES = {ON_SUCCESS_STEP: "on_success", ON_COMPLETE_STEP: "on_complete"}
PENDING_JOBS = [status.value for status in JOB_STATES[Outcome.PENDING]]


def workflows(site: Site, request: Request) -> Response:
    """The outermost workflows of a state (or all), newest first; ?id=N opens one."""
    wanted = request.arg("id")
    if wanted:
        return redirect(f"{request.root}/workflows/{whole_number(wanted, 'id', 'a workflow id')}")
    state = _choice(State, request.arg("state"), "state")
    after = request.arg("after")
    page = site.store().find_workflows(
        state, whole_number(after, "after", "a workflow id") if after else None, data.PAGE_SIZE)
    return site.render(request, "workflows.html", state=state.value if state else "",
                       states=LISTED_STATES, rows=[shown(row) for row in page.rows],
                       next_after=page.next_after, paged=bool(request.arg("after")))


def workflow(site: Site, request: Request, workflow_id: int) -> Response:
    store = site.store()
    row = workflow_or_404(store, workflow_id)
    outcome = _choice(Outcome, request.arg("show"), "show")
    after = _step(request.arg("after"))
    page = store.workflow_members(workflow_id, outcome, after, data.PAGE_SIZE)
    callbacks = [callback(job) for job in store.workflow_callbacks(workflow_id)]
    parent = None if row.parent_id is None else store.workflow(row.parent_id)
    return site.render(request, "workflow.html", flow=shown(row), show=outcome or "",
                       outcomes=list(Outcome), members=[member(item) for item in page.rows],
                       next_after=page.next_after, paged=after != BEFORE_MEMBERS,
                       callbacks=callbacks, parent=None if parent is None else shown(parent),
                       then=_then(store, row, parent),
                       can_retry=row.dead > 0 or any(c["status"] == "dead" for c in callbacks),
                       can_cancel=row.state in PENDING_STATES
                       or any(c["status"] in PENDING_JOBS for c in callbacks))


def workflow_or_404(store: Store, workflow_id: int) -> WorkflowRow:
    row = store.workflow(workflow_id)
    if row is None:
        raise NotFound(f"no workflow {workflow_id}")
    return row


def _then(store: Store, row: WorkflowRow, parent: WorkflowRow | None) -> dict[str, Any] | None:
    """What runs after a workflow nested in a chain (its parent): the chain's next step."""
    if parent is None or parent.kind is not Kind.CHAIN:
        return None
    following = store.workflow_members(parent.id, None, row.parent_step, 1).rows
    return member(following[0]) if following else None


def shown(row: WorkflowRow) -> dict[str, Any]:
    """A workflow for a template: its columns in plain words, and its pending count."""
    return {**data.plain(vars(row)), "pending": row.pending}


def member(item: Member) -> dict[str, Any]:
    return {"step": item.step, "job": None if item.job is None else data.plain(item.job),
            "workflow": None if item.workflow is None else shown(item.workflow)}


def callback(job: dict[str, Any]) -> dict[str, Any]:
    return {**data.plain(job), "name": CALLBACK_NAMES.get(int(job["workflow_step"]), "")}


def _choice(kind: Any, text: str, name: str) -> Any:
    """The enum value named by `text` ("" : None); 400 naming the choices."""
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise BadRequest(f"{name} must be one of "
                         f"{', '.join(item.value for item in kind)}") from None


def _step(text: str) -> int:
    """?after=STEP of a members' page: a step, 0 and up (none: from the first)."""
    return BEFORE_MEMBERS if not text else whole_number(text, "after", "a step")


def whole_number(text: str, name: str, what: str) -> int:
    """An id or a step given as `name`; 400 naming it when it is none."""
    if not data.JOB_ID.fullmatch(text) or int(text) > MAX_JOB_ID:
        raise BadRequest(f"{name} must be {what} (a whole number up to {MAX_JOB_ID})")
    return int(text)


ROUTES = (
    ("GET", "/workflows", workflows),
    ("GET", "/workflows/<job:workflow_id>", workflow),
)
