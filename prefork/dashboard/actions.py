"""The state-changing requests (POST only; app.check_post has already refused any
without a password set, a live session, our Origin and the session's CSRF token):
log in and out, retry and discard dead jobs (retry also cancelled ones), cancel a
job, pause and resume queues, restart.

The dashboard acts through the configured account. Retry, cancel, pause, resume and
restart need only the worker account's privileges; discard deletes rows, and an
account without DELETE is told so in one line."""
from collections.abc import Sequence

import pymysql
from pymysql.constants import ER
from werkzeug.exceptions import BadRequest, Forbidden, NotFound

from .. import logs
from ..events import Event
from ..jobs import QUEUE_PATTERN, JobStatus
from ..store.contract import Store
from . import data
from .auth import SESSION_COOKIE, set_session_cookie
from .site import Site
from .web import Request, Response, json_response, redirect

BATCH = 500          # dead jobs per request of a bulk action: one short transaction each
RETRIED = (JobStatus.DEAD, JobStatus.CANCELLED)   # what Retry takes by id, as the CLI's
ALL_HOSTS = "*"
CANCEL_NOTICES = {
    "cancelled": "Job {job} cancelled: it will not run.",
    "stopping": "Job {job} is running: its supervisor is stopping it (it ends cancelled).",
    "finished": "Job {job} had already finished: left as it is."}
NO_DELETE = ("discard needs the DELETE privilege on prefork_jobs, which this dashboard's "
             "database account lacks: use an admin account's `prefork-queue discard`")


def login(site: Site, request: Request) -> Response:
    if site.gate.locked_out(request.address):
        logs.event(Event.DASHBOARD_LOGIN_FAILED, address=request.address, locked_out=True)
        return site.render(request, "login.html", 429,
                           problem="too many wrong passwords: wait a few minutes")
    session_id = site.gate.log_in(request.address, request.form_value("password"))
    if session_id is None:
        logs.event(Event.DASHBOARD_LOGIN_FAILED, address=request.address, locked_out=False)
        return site.render(request, "login.html", 401,
                           problem="wrong password")
    response = redirect(request.root + "/")
    set_session_cookie(response, session_id, request.root, request.is_secure)
    return response


def logout(site: Site, request: Request) -> Response:
    site.gate.log_out(request.cookies.get(SESSION_COOKIE))
    response = redirect(request.root + "/")
    set_session_cookie(response, "", request.root, request.is_secure, 0)
    return response


# -- dead jobs ------------------------------------------------------------------------------

def act_on_dead(store: Store, action: str, ids: Sequence[int]) -> int:
    """Retry these dead or cancelled jobs, or discard these dead ones (others are left
    alone); how many changed."""
    if action == "retry":
        return store.retry_dead(list(ids), statuses=RETRIED) if ids else 0
    if action != "discard":
        raise BadRequest("action must be retry or discard")
    try:
        return store.discard_dead(list(ids))
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER.TABLEACCESS_DENIED_ERROR:
            raise Forbidden(NO_DELETE) from None
        raise


def selected(site: Site, request: Request, action: str) -> Response:
    """The dead jobs ticked on the page (or the one of a job's page)."""
    ids = [data.job_id(text, "id") for text in request.form.getlist("id")[:BATCH]]
    count = act_on_dead(site.store(), action, ids)
    audit(request, action, jobs=count, selected=len(ids))
    notify(request, f"Retried {count} job(s)." if action == "retry"
           else f"Discarded {count} dead job(s).")
    # A job retried from its own page shows that page again; anything else the list.
    back_to_job = request.form_value("back") == "job" and action == "retry" and ids
    return redirect(request.root + (f"/jobs/{ids[0]}" if back_to_job else "/dead"))


def batch(site: Site, request: Request) -> Response:
    """One bounded batch of a bulk action on every dead job matching the filter: the
    newest BATCH of them older than `after` (none: from the newest). The page sends
    the next_after of each answer until finished, so an interrupted run leaves every
    batch either done or untouched, and no job is taken twice in one run."""
    values = {name: request.form_value(name) for name in data.FILTER_ARGS}
    store = site.store()
    page = store.find_jobs(data.job_filter(values, JobStatus.DEAD),
                           data.optional_job_id(request.form_value("after"), "after"), BATCH)
    ids = [int(row["id"]) for row in page.rows]
    count = act_on_dead(store, request.form_value("action"), ids)
    audit(request, request.form_value("action"), jobs=count, batch_of=len(ids),
          filter={name: value for name, value in values.items() if value})
    return json_response({"processed": count, "seen": len(ids),
                          "next_after": page.next_after, "finished": page.next_after is None})


# -- cancelling ------------------------------------------------------------------------------------

def cancel(site: Site, request: Request) -> Response:
    """Cancel the job of a job's page: at once when ready, stopped by its supervisor
    when running; a finished one is left alone. Back to its page, which says which."""
    job_id = data.job_id(request.form_value("id"), "id")
    report = site.store().cancel([job_id])
    if report.missing:
        raise NotFound(f"no job {job_id}")
    outcome = ("cancelled" if report.cancelled else "stopping" if report.stopping
               else "finished")
    audit(request, "cancel", job=job_id, outcome=outcome)
    notify(request, CANCEL_NOTICES[outcome].format(job=job_id))
    return redirect(request.root + f"/jobs/{job_id}")


# -- queues and restarts --------------------------------------------------------------------------

def pause(site: Site, request: Request) -> Response:
    return _set_paused(site, request, True)


def resume(site: Site, request: Request) -> Response:
    return _set_paused(site, request, False)


def _set_paused(site: Site, request: Request, paused: bool) -> Response:
    queue = request.form_value("queue")
    if not QUEUE_PATTERN.fullmatch(queue):
        raise BadRequest("not a queue name")
    site.store().set_paused(queue, paused)
    done = "paused" if paused else "resumed"
    audit(request, done, queue=queue)
    notify(request, f"Queue {queue} {done}.")
    return redirect(request.root + "/queues")


def restart(site: Site, request: Request) -> Response:
    host = request.form_value("host") or ALL_HOSTS
    if host != ALL_HOSTS and host not in data.hosts(site.store()):
        raise BadRequest("no supervisor runs on that host")
    site.store().request_restart(host)
    audit(request, "restart", host=host)
    notify(request, f"Rolling restart requested for host {host} ('*': every host).")
    return redirect(request.root + "/restart")


def notify(request: Request, text: str) -> None:
    """What the action did, for the page its redirect shows: kept in the session,
    never put in the URL (where anyone could write a notice of their own)."""
    if request.session is not None:
        request.session.notice = text


def audit(request: Request, action: str, **fields: object) -> None:
    """Log what a logged-in user changed (there is one password: the address says who)."""
    logs.event(Event.DASHBOARD_ACTION, None, action=action, address=request.address,
               **fields)


ROUTES = (
    ("POST", "/login", login),
    ("POST", "/logout", logout),
    ("POST", "/dead/retry", lambda site, request: selected(site, request, "retry")),
    ("POST", "/dead/discard", lambda site, request: selected(site, request, "discard")),
    ("POST", "/api/dead/batch", batch),
    ("POST", "/jobs/cancel", cancel),
    ("POST", "/queues/pause", pause),
    ("POST", "/queues/resume", resume),
    ("POST", "/restart", restart),
)
