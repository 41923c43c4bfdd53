"""The dashboard as a WSGI application: create_app(config) -> a callable any WSGI
server runs (cheroot by `prefork-queue dashboard`, or gunicorn, behind a proxy).

Every request passes here: the URL prefix is split off, the route found, and every
POST checked before its handler runs (a password configured, a live session, the
request's Origin our own Host, the session's CSRF token), so no action can forget
a check. Each server thread keeps its own store (a connection is not shared
between threads); a database error drops it, and the next request reconnects.
"""
import functools
import re
import threading
from collections.abc import Iterable
from http import HTTPStatus
from importlib import resources
from typing import Any

import jinja2

from ..config import Config
from ..errors import DatabaseUnavailable, UserError
from ..failures import ErrorWriter, database_error
from ..store import driver_errors, open_store
from ..store.contract import Store
from . import actions, api, pages
from .auth import SESSION_COOKIE, Gate, configured_password, token_matches
from .web import HTTPError, Request, Response, Routes, StartResponse, json_response

STATIC_NAME = re.compile(r"[a-z0-9_-]{1,64}\.(js|css|svg)")
STATIC_TYPES = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
                "svg": "image/svg+xml"}
LOGIN_PATH = "/login"
# What a redirect after an action says, by the code it passes (never text from the URL).
NOTICES = {"retry": "Retried {count} job(s).", "discard": "Discarded {count} dead job(s).",
           "paused": "Queue {queue} paused.", "resumed": "Queue {queue} resumed.",
           "restart": "Rolling restart requested for host {host} ('*': every host).",
           "cancelled": "Job {job} cancelled: it will not run.",
           "stopping": "Job {job} is running: its supervisor is stopping it (it ends "
                       "cancelled).",
           "finished": "Job {job} had already finished: left as it is."}


def create_app(config: Config) -> "Dashboard":
    """The dashboard for this config. Checks the schema and reads the password now, so
    a wrong setting is one line at start, not an error on the first request."""
    store = open_store(config)
    try:
        store.check_schema()
    finally:
        store.close()
    return Dashboard(config, Gate(configured_password(config)))


def url_prefix(text: str) -> str:
    """"/queue" from "queue/", "/queue", "/queue/"; "" for the root."""
    text = text.strip().strip("/")
    return f"/{text}" if text else ""


class Dashboard:
    def __init__(self, config: Config, gate: Gate) -> None:
        self.config = config
        self.gate = gate
        self.prefix = url_prefix(config.dashboard_url_prefix or "")
        self.redact_keys: list[str] = list(config.dashboard_redact or [])
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("prefork.dashboard", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined)
        self.routes = Routes()
        self.routes.add("GET", r"/static/(?P<name>[^/]+)", self.static)
        for module in (pages, actions, api):
            for method, pattern, handler in module.ROUTES:
                self.routes.add(method, pattern, functools.partial(handler, self))
        self._local = threading.local()

    # -- the store of this thread ----------------------------------------------------------
    def store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = open_store(self.config)
        return store

    def _drop_store(self) -> None:
        store = getattr(self._local, "store", None)
        self._local.store = None
        if store is not None:
            try:
                store.close()
            except driver_errors():
                pass

    # -- WSGI ------------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ, self.prefix)
        try:
            response = self.dispatch(request)
        except HTTPError as exc:
            response = self.error(request, exc.status, exc.message)
        except UserError as exc:   # the store refused an input: a one-line answer
            response = self.error(request, HTTPStatus.BAD_REQUEST, str(exc))
        except DatabaseUnavailable as exc:
            self._drop_store()
            response = self.error(request, HTTPStatus.SERVICE_UNAVAILABLE, str(exc))
        except driver_errors() as exc:
            self._drop_store()
            text = " ".join(ErrorWriter().mask(database_error(exc)).splitlines())
            response = self.error(request, HTTPStatus.SERVICE_UNAVAILABLE,
                                  f"database error {text}")
        body = response.send(start_response)
        return [] if request.method == "HEAD" else body

    def dispatch(self, request: Request) -> Response:
        handler, groups = self.routes.find(request.method, request.path)
        request.session = self.gate.session(request.cookie(SESSION_COOKIE))
        if request.method == "POST":
            self.check_post(request)
        response: Response = handler(request, **groups)
        return response

    def check_post(self, request: Request) -> None:
        """Refuse, before any handler runs, a POST that is not ours to take."""
        if self.gate.read_only:
            raise HTTPError(HTTPStatus.FORBIDDEN, "read-only: no dashboard password is set")
        if not request.same_origin():
            raise HTTPError(HTTPStatus.FORBIDDEN, "refused: the request's Origin is not "
                            "this dashboard")
        if request.path == LOGIN_PATH:
            return
        session = request.session
        if session is None:
            raise HTTPError(HTTPStatus.FORBIDDEN, "log in first")
        given = request.form_value("csrf") or request.header("X-CSRF-Token")
        if not token_matches(session, given):
            raise HTTPError(HTTPStatus.FORBIDDEN, "refused: missing or wrong CSRF token")

    # -- answers ------------------------------------------------------------------------------------
    def render(self, request: Request, template: str, status: HTTPStatus = HTTPStatus.OK,
               **context: Any) -> Response:
        session = request.session
        page = self.templates.get_template(template).render(
            root=request.root, path=request.path, read_only=self.gate.read_only,
            can_act=session is not None, csrf=session.csrf if session else "",
            notice=notice_text(request), **context)
        return Response(page.encode("utf-8"), status)

    def error(self, request: Request, status: HTTPStatus, message: str) -> Response:
        if request.path.startswith("/api/"):
            return json_response({"error": message}, status)
        return self.render(request, "error.html", status, message=message)

    def static(self, request: Request, name: str) -> Response:
        match = STATIC_NAME.fullmatch(name)
        if not match:
            raise HTTPError(HTTPStatus.NOT_FOUND, "no such file")
        try:
            body = (resources.files("prefork.dashboard") / "static" / name).read_bytes()
        except FileNotFoundError:
            raise HTTPError(HTTPStatus.NOT_FOUND, "no such file") from None
        # Cached for a while, revalidated on a reload: an upgrade shows within the hour.
        return Response(body, content_type=STATIC_TYPES[match.group(1)],
                        cache="public, max-age=3600")


def notice_text(request: Request) -> str:
    template = NOTICES.get(request.arg("notice"))
    if template is None:
        return ""
    return template.format(count=request.arg("count"), queue=request.arg("queue"),
                           host=request.arg("host"), job=request.arg("job"))
