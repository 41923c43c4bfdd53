"""The JSON API (GET, read-only, no login needed): what the pages show, for the pages'
own scripts and for anyone's scripts. The one POST, a bulk action's batch, is in
actions.py with the other actions."""
from . import data
from .site import Site
from .web import Request, Response, json_response


def overview(site: Site, request: Request) -> Response:
    return json_response(data.overview(site.store(), site.config.heartbeat_interval))


def throughput(site: Site, request: Request) -> Response:
    return json_response(data.throughput(site.store(), request.arg("range") or "hour",
                                          request.arg("queue") or None))


def jobs(site: Site, request: Request) -> Response:
    found = site.store().find_jobs(data.job_filter(data.filter_values(request)),
                                   data.optional_job_id(request.arg("after"), "after"),
                                   data.PAGE_SIZE)
    return json_response(data.job_list(found))


def job(site: Site, request: Request, job_id: int) -> Response:
    return json_response(data.job_detail(data.job_row(site.store(), job_id), site.redact_keys))


def schedules(site: Site, request: Request) -> Response:
    return json_response({"schedules": data.schedule_rows(site.store(), site.config)})


ROUTES = (
    ("GET", "/api/overview", overview),
    ("GET", "/api/throughput", throughput),
    ("GET", "/api/jobs", jobs),
    ("GET", "/api/jobs/<job:job_id>", job),
    ("GET", "/api/schedules", schedules),
)
