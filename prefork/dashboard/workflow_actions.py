"""The actions on a workflow (POST only; app.check_post has already refused any
without a password set, a live session, our Origin and the session's CSRF token):
retry its dead jobs, and cancel the rest, in it and in every workflow nested in it.

Both act a bounded batch of jobs per transaction through the store's own retry and
cancel, so each job's workflow bookkeeping is the one every retry and cancel
commits with it: a retried member reopens its workflow (and the ones above it), a
cancelled one counts as ended."""
from werkzeug.exceptions import BadRequest

from ..jobs import JobStatus
from ..store.contract import Store
from ..store.workflow_views import tree_job_ids
from .actions import audit, notify
from .site import Site
from .web import Request, Response, redirect
from .workflow_pages import whole_number, workflow_or_404

# What "cancel the rest" ends, in this order: the waiting jobs first, so that no
# member cancelled later can release one of them (a group that passes on its
# members' ends, policy "ended", would release its callback).
CANCEL_ORDER = (JobStatus.WAITING, JobStatus.READY, JobStatus.RESERVED)


def retry(site: Site, request: Request) -> Response:
    """Retry the dead jobs of the workflow: each runs again, its workflow resumed."""
    store, workflow_id = site.store(), _workflow_id(request)
    workflow_or_404(store, workflow_id)
    count = retry_dead(store, workflow_id)
    audit(request, "workflow_retry", workflow=workflow_id, jobs=count)
    notify(request, f"Retried {count} dead job(s) of workflow {workflow_id}.")
    return redirect(f"{request.root}/workflows/{workflow_id}")


def cancel(site: Site, request: Request) -> Response:
    """Cancel every job of the workflow that has not ended: those not started at once,
    running ones stopped by their supervisors (they end cancelled)."""
    store, workflow_id = site.store(), _workflow_id(request)
    workflow_or_404(store, workflow_id)
    cancelled, stopping = cancel_rest(store, workflow_id)
    audit(request, "workflow_cancel", workflow=workflow_id, cancelled=cancelled,
          stopping=stopping)
    notify(request, f"Cancelled {cancelled} job(s) of workflow {workflow_id}"
           + (f"; {stopping} running job(s) are being stopped." if stopping else "."))
    return redirect(f"{request.root}/workflows/{workflow_id}")


def retry_dead(store: Store, workflow_id: int) -> int:
    """Retry the dead jobs of a workflow and of those nested in it; how many."""
    return sum(store.retry_dead(batch, statuses=(JobStatus.DEAD,))
               for batch in tree_job_ids(store, workflow_id, (JobStatus.DEAD,)))


def cancel_rest(store: Store, workflow_id: int) -> tuple[int, int]:
    """Cancel the jobs of a workflow and of those nested in it that have not ended:
    (how many were cancelled now, how many running ones are being stopped)."""
    cancelled = stopping = 0
    for status in CANCEL_ORDER:
        for batch in tree_job_ids(store, workflow_id, (status,)):
            report = store.cancel(batch)
            cancelled, stopping = cancelled + len(report.cancelled), stopping + len(report.stopping)
    return cancelled, stopping


def _workflow_id(request: Request) -> int:
    text = request.form_value("id")
    if not text:
        raise BadRequest("id must be a workflow id")
    return whole_number(text, "id", "a workflow id")


ROUTES = (
    ("POST", "/workflows/retry", retry),
    ("POST", "/workflows/cancel", cancel),
)
