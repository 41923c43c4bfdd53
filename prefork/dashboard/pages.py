"""The HTML pages (GET only): overview, jobs, one job, dead jobs, queues, schedules,
restart, and the login form. Each renders a template from the store's indexed reads
(data.py); the overview's live figures and charts are drawn by static/dashboard.js and
static/charts.js from the JSON API."""
from werkzeug.exceptions import BadRequest, NotFound

from ..jobs import JobStatus
from . import data
from .site import Site
from .web import Request, Response, redirect


def overview(site: Site, request: Request) -> Response:
    return site.render(request, "overview.html",
                       **data.overview(site.store(), site.config.heartbeat_interval))


def jobs(site: Site, request: Request) -> Response:
    return _job_list(site, request, "jobs.html", None)


def dead(site: Site, request: Request) -> Response:
    return _job_list(site, request, "dead.html", JobStatus.DEAD)


def _job_list(site: Site, request: Request, template: str,
              status: JobStatus | None) -> Response:
    values = data.filter_values(request)
    try:
        found = site.store().find_jobs(data.job_filter(values, status),
                                       data.optional_job_id(request.arg("after"), "after"),
                                       data.PAGE_SIZE)
    except BadRequest as exc:   # a bad filter: the form again, with the problem named
        return site.render(request, template, 400, filters=values, statuses=list(JobStatus),
                           problem=exc.description, page=None, paged=False)
    return site.render(request, template, filters=values, statuses=list(JobStatus),
                       problem="", page=data.job_list(found), paged=bool(request.arg("after")))


def job(site: Site, request: Request, job_id: int) -> Response:
    store = site.store()
    row = data.job_row(store, job_id)
    return site.render(request, "job.html", job=data.job_detail(row, site.redact_keys),
                       place=store.workflow_place(job_id))   # a workflow's member, or None


def queues(site: Site, request: Request) -> Response:
    return site.render(request, "queues.html", queues=data.queues(site.store()))


def schedules(site: Site, request: Request) -> Response:
    return site.render(request, "schedules.html",
                       schedules=data.schedule_rows(site.store(), site.config))


def restart(site: Site, request: Request) -> Response:
    running = data.supervisors(site.store(), site.config.heartbeat_interval)
    return site.render(request, "restart.html", supervisors=running,
                       hosts=sorted({sup["host"] for sup in running}))


def login_form(site: Site, request: Request) -> Response:
    if site.gate.read_only:
        raise NotFound("read-only: no dashboard password is set, "
                        "so there is nothing to log in to")
    if request.session is not None:
        return redirect(request.root + "/")
    return site.render(request, "login.html", problem="")


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
