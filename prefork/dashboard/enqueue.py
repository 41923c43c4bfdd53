"""The HTTP enqueue endpoint, POST /api/enqueue: a producer's job as a JSON object,
checked as `prefork-queue enqueue` checks it, inserted, and its id answered (the
same id again for a repeated queue and idempotency key). app.check_post has
already refused the request unless the endpoint is on, the request carries its
token, and no other site's page sent it."""
from werkzeug.exceptions import UnsupportedMediaType

from ..job_fields import check_job_types, job_from_fields
from ..jobs import parse_json
from .site import Site
from .web import Request, Response, json_response

ENQUEUE_PATH = "/api/enqueue"
JSON_TYPE = "application/json"


def enqueue(site: Site, request: Request) -> Response:
    """{"type": ..., "payload": {...}, "queue", "key", "delay", "priority",
    "max_attempts", "concurrency_key"} -> {"id": N}. The body is at most
    web.MAX_FORM_BYTES (413 beyond)."""
    if request.mimetype != JSON_TYPE:
        raise UnsupportedMediaType(f"send the job as JSON (Content-Type: {JSON_TYPE})")
    job = job_from_fields(parse_json(request.get_data(cache=False), "body"), site.config)
    check_job_types([job.type], site.config)
    return json_response({"id": site.store().enqueue(job)})


ROUTES = (
    ("POST", ENQUEUE_PATH, enqueue),
)
