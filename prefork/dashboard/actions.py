"""The state-changing requests (POST only; app.check_post has already refused any
without a password set, a live session, our Origin and the session's CSRF token):
log in and out, retry and discard dead jobs (retry also cancelled ones), cancel a
job, pause and resume queues, restart.

The dashboard acts through the configured account. Retry, cancel, pause, resume and
restart need only the worker account's privileges; discard deletes rows, and an
account without DELETE is told so in one line."""
from collections.abc import Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pymysql
from pymysql.constants import ER

from .. import logs
from ..events import Event
from ..jobs import QUEUE_PATTERN, JobStatus
from ..store.contract import Store
from . import data
from .auth import SESSION_COOKIE, session_cookie
from .web import HTTPError, Request, Response, json_response, redirect

if TYPE_CHECKING:
    from .app import Dashboard

BATCH = 500          # dead jobs per request of a bulk action: one short transaction each
RETRIED = (JobStatus.DEAD, JobStatus.CANCELLED)   # what Retry takes by id, as the CLI's
ALL_HOSTS = "*"
NO_DELETE = ("discard needs the DELETE privilege on prefork_jobs, which this dashboard's "
             "database account lacks: use an admin account's `prefork-queue discard`")


def login(app: "Dashboard", request: Request) -> Response:
    if app.gate.locked_out(request.remote_addr):
        logs.event(Event.DASHBOARD_LOGIN_FAILED, address=request.remote_addr, locked_out=True)
        return app.render(request, "login.html", HTTPStatus.TOO_MANY_REQUESTS,
                          problem="too many wrong passwords: wait a few minutes")
    session_id = app.gate.log_in(request.remote_addr, request.form_value("password"))
    if session_id is None:
        logs.event(Event.DASHBOARD_LOGIN_FAILED, address=request.remote_addr, locked_out=False)
        return app.render(request, "login.html", HTTPStatus.UNAUTHORIZED,
                          problem="wrong password")
    response = redirect(request.root + "/")
    response.headers.append(("Set-Cookie", session_cookie(session_id, request.root,
                                                          request.secure)))
    return response


def logout(app: "Dashboard", request: Request) -> Response:
    app.gate.log_out(request.cookie(SESSION_COOKIE))
    response = redirect(request.root + "/")
    response.headers.append(("Set-Cookie", session_cookie("", request.root, request.secure, 0)))
    return response


# -- dead jobs ------------------------------------------------------------------------------

def act_on_dead(store: Store, action: str, ids: Sequence[int]) -> int:
    """Retry these dead or cancelled jobs, or discard these dead ones (others are left
    alone); how many changed."""
    if action == "retry":
        return store.retry_dead(list(ids), statuses=RETRIED) if ids else 0
    if action != "discard":
        raise HTTPError(HTTPStatus.BAD_REQUEST, "action must be retry or discard")
    try:
        return store.discard_dead(list(ids))
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER.TABLEACCESS_DENIED_ERROR:
            raise HTTPError(HTTPStatus.FORBIDDEN, NO_DELETE) from None
        raise


def selected(app: "Dashboard", request: Request, action: str) -> Response:
    """The dead jobs ticked on the page (or the one of a job's page)."""
    ids = [int(text) for text in request.form.get("id", []) if text.isdigit()][:BATCH]
    count = act_on_dead(app.store(), action, ids)
    audit(request, action, jobs=count, selected=len(ids))
    # A job retried from its own page shows that page again; anything else the list.
    back_to_job = request.form_value("back") == "job" and action == "retry" and ids
    where = f"/jobs/{ids[0]}" if back_to_job else "/dead"
    return redirect(request.root + where + "?" + urlencode({"notice": action, "count": count}))


def batch(app: "Dashboard", request: Request) -> Response:
    """One bounded batch of a bulk action on every dead job matching the filter: the
    newest BATCH of them older than `after` (none: from the newest). The page sends
    the next_after of each answer until finished, so an interrupted run leaves every
    batch either done or untouched, and no job is taken twice in one run."""
    values = {name: request.form_value(name) for name in data.FILTER_ARGS}
    store = app.store()
    page = store.find_jobs(data.job_filter(values, JobStatus.DEAD),
                           data.after_id(request.form_value("after")), BATCH)
    ids = [int(row["id"]) for row in page.rows]
    count = act_on_dead(store, request.form_value("action"), ids)
    audit(request, request.form_value("action"), jobs=count, batch_of=len(ids),
          filter={name: value for name, value in values.items() if value})
    return json_response({"processed": count, "seen": len(ids),
                          "next_after": page.next_after, "finished": page.next_after is None})


# -- cancelling ------------------------------------------------------------------------------------

def cancel(app: "Dashboard", request: Request) -> Response:
    """Cancel the job of a job's page: at once when ready, stopped by its supervisor
    when running; a finished one is left alone. Back to its page, which says which."""
    text = request.form_value("id")
    if not text.isdigit() or len(text) > 19:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "id must be a job id (a whole number)")
    job_id = int(text)
    report = app.store().cancel([job_id])
    if report.missing:
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no job {job_id}")
    outcome = ("cancelled" if report.cancelled else "stopping" if report.stopping
               else "finished")
    audit(request, "cancel", job=job_id, outcome=outcome)
    return redirect(request.root + f"/jobs/{job_id}?" + urlencode({"notice": outcome,
                                                                   "job": job_id}))


# -- queues and restarts --------------------------------------------------------------------------

def pause(app: "Dashboard", request: Request) -> Response:
    return _set_paused(app, request, True)


def resume(app: "Dashboard", request: Request) -> Response:
    return _set_paused(app, request, False)


def _set_paused(app: "Dashboard", request: Request, paused: bool) -> Response:
    queue = request.form_value("queue")
    if not QUEUE_PATTERN.fullmatch(queue):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "not a queue name")
    app.store().set_paused(queue, paused)
    notice = "paused" if paused else "resumed"
    audit(request, notice, queue=queue)
    return redirect(request.root + "/queues?" + urlencode({"notice": notice, "queue": queue}))


def restart(app: "Dashboard", request: Request) -> Response:
    host = request.form_value("host") or ALL_HOSTS
    if host != ALL_HOSTS and host not in data.hosts(app.store()):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "no supervisor runs on that host")
    app.store().request_restart(host)
    audit(request, "restart", host=host)
    return redirect(request.root + "/restart?" + urlencode({"notice": "restart", "host": host}))


def audit(request: Request, action: str, **fields: object) -> None:
    """Log what a logged-in user changed (there is one password: the address says who)."""
    logs.event(Event.DASHBOARD_ACTION, None, action=action, address=request.remote_addr,
               **fields)


ROUTES = (
    ("POST", r"/login", login),
    ("POST", r"/logout", logout),
    ("POST", r"/dead/retry", lambda app, request: selected(app, request, "retry")),
    ("POST", r"/dead/discard", lambda app, request: selected(app, request, "discard")),
    ("POST", r"/api/dead/batch", batch),
    ("POST", r"/jobs/cancel", cancel),
    ("POST", r"/queues/pause", pause),
    ("POST", r"/queues/resume", resume),
    ("POST", r"/restart", restart),
)
