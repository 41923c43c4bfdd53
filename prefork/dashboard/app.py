"""The dashboard as a WSGI application: create_app(config) -> a callable any WSGI
server runs (cheroot by `prefork-queue dashboard`, or gunicorn, behind a proxy).

Every request passes here: its Host checked (one of the names we serve), the URL
prefix split off, the route found, and every POST checked before its handler runs
(a password configured, a live session, the request's Origin our own Host, the
session's CSRF token; for the enqueue endpoint, its token and no foreign Origin),
so no action can forget a check. Whatever a handler raises
is answered here too, with the headers every answer carries: its own status for
an HTTP error, 400 for refused input, 503 when the database is away, 500 (logged
with its traceback) for anything else. The handlers (pages.py, api.py, actions.py,
enqueue.py, workflow_pages.py, workflow_actions.py) are given the Site (site.py), never
this module's objects.
"""
import functools
import re
from collections.abc import Iterable
from importlib import resources
from wsgiref.types import StartResponse, WSGIEnvironment

from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import (BadRequest, Forbidden, HTTPException, InternalServerError,
                                 NotFound, ServiceUnavailable, Unauthorized)

from .. import logs
from ..config import Config
from ..errors import DatabaseUnavailable, UserError
from ..events import Event
from ..failures import ErrorWriter, database_error
from ..store import driver_errors, open_store
from . import actions, api, enqueue, pages, workflow_actions, workflow_pages
from .auth import (SESSION_COOKIE, Gate, bearer_matches, configured_enqueue_token,
                   configured_secret, token_matches)
from .hosts import ServedNames, parse_bind
from .site import Site
from .web import Request, Response, Routes, json_response, secured

STATIC_NAME = re.compile(r"[a-z0-9_-]{1,64}\.(js|css|svg)")
STATIC_TYPES = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
                "svg": "image/svg+xml"}
LOGIN_PATH = "/login"
RETRY_AFTER_SECONDS = 5   # a database outage: when monitoring and scripts may ask again
READS = ("GET", "HEAD")   # safe to run again on a new connection
FOREIGN_HOST = ("the Host header names no host this dashboard serves (a reverse proxy's "
                "names go in dashboard_allowed_hosts)")
FAULT = "internal error: the dashboard's log has the details (dashboard_request_failed)"
FOREIGN_ORIGIN = "refused: the request's Origin is not this dashboard"
ENQUEUE_OFF = ("the enqueue endpoint is off: set dashboard_enqueue_token (environment) or "
               "dashboard_enqueue_token_file to turn it on")
WRONG_TOKEN = "missing or wrong enqueue token (send Authorization: Bearer TOKEN)"


def create_app(config: Config) -> "Dashboard":
    """The dashboard for this config. Checks the schema and reads the password and the
    enqueue token now, so a wrong setting is one line at start, not an error on the
    first request."""
    store = open_store(config)
    try:
        store.check_schema()
    finally:
        store.close()
    return Dashboard(config, Gate(configured_secret(config, "dashboard_password")),
                     configured_enqueue_token(config))


def url_prefix(text: str) -> str:
    """"/queue" from "queue/", "/queue", "/queue/"; "" for the root."""
    text = text.strip().strip("/")
    return f"/{text}" if text else ""


class Dashboard:
    def __init__(self, config: Config, gate: Gate, enqueue_token: str | None = None) -> None:
        self.site = Site(config, gate)
        self.gate = gate
        self.enqueue_token = enqueue_token   # None: the enqueue endpoint is off
        self.prefix = url_prefix(config.dashboard_url_prefix or "")
        self.hosts = ServedNames(parse_bind(config.dashboard_bind)[0],
                                 config.dashboard_allowed_hosts or [])
        self.routes = Routes([("GET", "/static/<name>", self.static)] + [
            (method, path, functools.partial(handler, self.site))
            for module in (pages, actions, api, enqueue, workflow_pages, workflow_actions)
            for method, path, handler in module.ROUTES])

    # -- WSGI ------------------------------------------------------------------------------------
    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ, self.prefix)
        response = secured(self.answer(request))
        return response(environ, start_response)   # no body for HEAD

    def answer(self, request: Request) -> Response:
        """The handler's response, or the error page (JSON under /api/) of what it raised."""
        try:
            return self.dispatch(request)
        except HTTPException as exc:
            return self.error(request, exc)
        except DatabaseUnavailable as exc:   # a UserError, but not the client's
            return self.unavailable(request, str(exc))
        except UserError as exc:   # the store refused an input: a one-line answer
            return self.error(request, BadRequest(str(exc)))
        except driver_errors() as exc:
            text = " ".join(ErrorWriter().mask(database_error(exc)).splitlines())
            return self.unavailable(request, f"database error {text}")
        except Exception as exc:
            logs.unexpected(Event.DASHBOARD_REQUEST_FAILED, exc, method=request.method,
                            path=request.route_path)
            try:
                return self.error(request, InternalServerError(FAULT))
            except Exception:   # the error page itself failed: its line as text
                return Response(FAULT, 500, mimetype="text/plain")

    def dispatch(self, request: Request) -> Response:
        if not self.hosts.serves(request.header("Host")):
            raise BadRequest(FOREIGN_HOST)
        handler, values = self.routes.find(request)
        request.session = self.gate.session(request.cookies.get(SESSION_COOKIE))
        if request.method == "POST":
            self.check_post(request)
        reused = self.site.has_store()
        try:
            return handler(request, **values)
        except driver_errors():
            if not reused or request.method not in READS:
                raise
        # This thread's connection, idle since its last request, was lost (the server
        # restarted): a read is answered on a new one, not with a 503.
        self.site.drop_store()
        return handler(request, **values)

    def check_post(self, request: Request) -> None:
        """Refuse, before any handler runs, a POST that is not ours to take."""
        if request.route_path == enqueue.ENQUEUE_PATH:
            self.check_producer(request)
            return
        if self.gate.read_only:
            raise Forbidden("read-only: no dashboard password is set")
        if not request.same_origin():
            raise Forbidden(FOREIGN_ORIGIN)
        if request.route_path == LOGIN_PATH:
            return
        session = request.session
        if session is None:
            raise Forbidden("log in first")
        given = request.form_value("csrf") or request.header("X-CSRF-Token")
        if not token_matches(session, given):
            raise Forbidden("refused: missing or wrong CSRF token")

    def check_producer(self, request: Request) -> None:
        """The enqueue endpoint's checks: it is on; a browser's request comes from our
        own page (a producer's program sends no Origin); the token is right."""
        if self.enqueue_token is None:
            raise NotFound(ENQUEUE_OFF)
        if request.header("Origin") and not request.same_origin():
            raise Forbidden(FOREIGN_ORIGIN)
        if not bearer_matches(self.enqueue_token, request.header("Authorization")):
            logs.event(Event.DASHBOARD_ENQUEUE_REFUSED, address=request.address)
            raise Unauthorized(WRONG_TOKEN, www_authenticate=WWWAuthenticate("bearer"))

    # -- answers ------------------------------------------------------------------------------------
    def error(self, request: Request, exc: HTTPException) -> Response:
        """Its one line, as a page or as {"error": ...}, with the headers it names
        (Allow, Retry-After)."""
        status, message = exc.code or 500, exc.description or exc.name
        if request.route_path.startswith("/api/"):
            response = json_response({"error": message}, status)
        else:
            response = self.site.render(request, "error.html", status, message=message)
        for name, value in exc.get_headers():
            if name.lower() != "content-type":
                response.headers[name] = value
        return response

    def unavailable(self, request: Request, message: str) -> Response:
        """503: the database is away, not the request at fault; the next request
        reconnects."""
        self.site.drop_store()
        return self.error(request, ServiceUnavailable(message, retry_after=RETRY_AFTER_SECONDS))

    def static(self, request: Request, name: str) -> Response:
        match = STATIC_NAME.fullmatch(name)
        if not match:
            raise NotFound("no such file")
        try:
            body = (resources.files("prefork.dashboard") / "static" / name).read_bytes()
        except FileNotFoundError:
            raise NotFound("no such file") from None
        # Cached for a while, revalidated on a reload: an upgrade shows within the hour.
        return Response(body, content_type=STATIC_TYPES[match.group(1)],
                        headers=[("Cache-Control", "public, max-age=3600")])
