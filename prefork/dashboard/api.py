"""The JSON API (GET, read-only, no login needed): what the pages show, for the pages'
own scripts and for anyone's scripts. The one POST, a bulk action's batch, is in
actions.py with the other actions."""
from http import HTTPStatus
from typing import TYPE_CHECKING

from . import data
from .web import HTTPError, Request, Response, json_response

if TYPE_CHECKING:
    from .app import Dashboard


def overview(app: "Dashboard", request: Request) -> Response:
    return json_response(data.overview(app.store(), app.config.heartbeat_interval))


def throughput(app: "Dashboard", request: Request) -> Response:
    return json_response(data.throughput(app.store(), request.arg("range") or "hour",
                                         request.arg("queue") or None))


def jobs(app: "Dashboard", request: Request) -> Response:
    found = app.store().find_jobs(data.job_filter(data.filter_values(request)),
                                  data.after_id(request.arg("after")), data.PAGE_SIZE)
    return json_response(data.job_list(found))


def job(app: "Dashboard", request: Request, job_id: str) -> Response:
    row = app.store().get(int(job_id))
    if row is None:
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no job {job_id}")
    return json_response(data.job_detail(row, app.redact_keys))


def schedules(app: "Dashboard", request: Request) -> Response:
    return json_response({"schedules": data.schedule_rows(app.store(), app.config)})


ROUTES = (
    ("GET", r"/api/overview", overview),
    ("GET", r"/api/throughput", throughput),
    ("GET", r"/api/jobs", jobs),
    ("GET", r"/api/jobs/(?P<job_id>[0-9]{1,19})", job),
    ("GET", r"/api/schedules", schedules),
)
