"""The JSON API (GET, read-only, no login needed): what the pages show, for the pages'
own scripts and for anyone's scripts. The one POST, a bulk action's batch, is in
actions.py with the other actions."""
from typing import TYPE_CHECKING

from . import data
from .web import Request, Response, json_response

if TYPE_CHECKING:
    from .app import Dashboard


def overview(app: "Dashboard", request: Request) -> Response:
    return json_response(data.overview(app.store(), app.config.heartbeat_interval))


def throughput(app: "Dashboard", request: Request) -> Response:
    return json_response(data.throughput(app.store(), request.arg("range") or "hour",
                                         request.arg("queue") or None))


def jobs(app: "Dashboard", request: Request) -> Response:
    found = app.store().find_jobs(data.job_filter(data.filter_values(request)),
                                  data.optional_job_id(request.arg("after"), "after"), data.PAGE_SIZE)
    return json_response(data.job_list(found))


def job(app: "Dashboard", request: Request, job_id: int) -> Response:
    return json_response(data.job_detail(data.job_row(app.store(), job_id), app.redact_keys))


def schedules(app: "Dashboard", request: Request) -> Response:
    return json_response({"schedules": data.schedule_rows(app.store(), app.config)})


ROUTES = (
    ("GET", "/api/overview", overview),
    ("GET", "/api/throughput", throughput),
    ("GET", "/api/jobs", jobs),
    ("GET", "/api/jobs/<job:job_id>", job),
    ("GET", "/api/schedules", schedules),
)
