"""The HTML pages (GET only): overview, jobs, one job, dead jobs, queues, schedules,
restart, and the login form. Each renders a template from the store's indexed reads
(data.py); the overview's live figures and charts are drawn by static/dashboard.js and static/charts.js
from the JSON API."""
from typing import TYPE_CHECKING

from werkzeug.exceptions import BadRequest, NotFound

from ..jobs import JobStatus
from . import data
from .web import Request, Response, redirect

if TYPE_CHECKING:
    from .app import Dashboard


def overview(app: "Dashboard", request: Request) -> Response:
    return app.render(request, "overview.html",
                      **data.overview(app.store(), app.config.heartbeat_interval))


def jobs(app: "Dashboard", request: Request) -> Response:
    return _job_list(app, request, "jobs.html", None)


def dead(app: "Dashboard", request: Request) -> Response:
    return _job_list(app, request, "dead.html", JobStatus.DEAD)


def _job_list(app: "Dashboard", request: Request, template: str,
              status: JobStatus | None) -> Response:
    values = data.filter_values(request)
    try:
        found = app.store().find_jobs(data.job_filter(values, status),
                                      data.optional_job_id(request.arg("after"), "after"), data.PAGE_SIZE)
    except BadRequest as exc:   # a bad filter: the form again, with the problem named
        return app.render(request, template, 400, filters=values, statuses=list(JobStatus),
                          problem=exc.description, page=None, paged=False)
    return app.render(request, template, filters=values, statuses=list(JobStatus),
                      problem="", page=data.job_list(found), paged=bool(request.arg("after")))


def job(app: "Dashboard", request: Request, job_id: int) -> Response:
    row = data.job_row(app.store(), job_id)
    return app.render(request, "job.html", job=data.job_detail(row, app.redact_keys))


def queues(app: "Dashboard", request: Request) -> Response:
    return app.render(request, "queues.html", queues=data.queues(app.store()))


def schedules(app: "Dashboard", request: Request) -> Response:
    return app.render(request, "schedules.html",
                      schedules=data.schedule_rows(app.store(), app.config))


def restart(app: "Dashboard", request: Request) -> Response:
    running = data.supervisors(app.store(), app.config.heartbeat_interval)
    return app.render(request, "restart.html", supervisors=running,
                      hosts=sorted({sup["host"] for sup in running}))


def login_form(app: "Dashboard", request: Request) -> Response:
    if app.gate.read_only:
        raise NotFound("read-only: no dashboard password is set, "
                        "so there is nothing to log in to")
    if request.session is not None:
        return redirect(request.root + "/")
    return app.render(request, "login.html", problem="")


ROUTES = (
    ("GET", "/", overview),
    ("GET", "/jobs", jobs),
    ("GET", "/jobs/<job:job_id>", job),
    ("GET", "/dead", dead),
    ("GET", "/queues", queues),
    ("GET", "/schedules", schedules),
    ("GET", "/restart", restart),
    ("GET", "/login", login_form),
)
