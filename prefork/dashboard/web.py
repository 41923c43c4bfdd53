"""The dashboard's request and response, on werkzeug: a request that knows the URL
prefix, the form values and the session, every answer's security headers, and the
table of routes.

werkzeug parses what a client sends (query strings and forms in any encoding,
cookies, sizes) without ever raising on odd input, and its HTTPException classes
are the error answers (app.py gives them our page and headers).
"""
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import BaseConverter, Map, Rule, ValidationError
from werkzeug.wrappers import Request as BaseRequest
from werkzeug.wrappers import Response

from .auth import Session

MAX_FORM_BYTES = 256 * 1024   # the largest form: a page of selected job ids
MAX_JOB_ID = 2 ** 63 - 1      # BIGINT's largest, and SQLite's
# A job id's digits: ASCII only (isdigit(), int() and \d take other scripts' digits too).
JOB_ID_DIGITS = "[0-9]{1,19}"

# No inline script or style anywhere: every script and sheet is a static file of ours.
SECURITY_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "
     "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
     "object-src 'none'; frame-ancestors 'none'"),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)

__all__ = ["Request", "Response", "Routes", "json_response", "redirect", "secured"]


class Request(BaseRequest):
    max_form_memory_size = MAX_FORM_BYTES
    max_content_length = MAX_FORM_BYTES

    def __init__(self, environ: dict[str, Any], prefix: str = "") -> None:
        super().__init__(environ)
        self.root, self.route_path = _split_prefix(self.script_root, self.path, prefix)
        self.session: Session | None = None   # the live login session, set by the app

    @property
    def address(self) -> str:
        """The client's address as the WSGI server saw it (behind a proxy: the proxy's)."""
        return self.remote_addr or ""

    def header(self, name: str) -> str:
        return self.headers.get(name, "")

    def same_origin(self) -> bool:
        """The Origin header (or, without one, the Referer) names this Host (one the
        app has already checked is ours): the request comes from our own page, not
        from another site's form or script."""
        source = self.header("Origin") or self.header("Referer")
        host = self.header("Host")
        if not source or source == "null" or not host:
            return False
        try:
            parts = urlsplit(source)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()

    def arg(self, name: str) -> str:
        return str(self.args.get(name, "")).strip()

    def form_value(self, name: str) -> str:
        return str(self.form.get(name, ""))


def _split_prefix(script_root: str, path: str, prefix: str) -> tuple[str, str]:
    """(root, path): SCRIPT_NAME as the WSGI server set it (gunicorn behind a proxy that
    passes it), plus the configured prefix when the path still starts with it (a proxy
    that forwards the whole path)."""
    root = script_root.rstrip("/")
    if prefix and (path == prefix or path.startswith(prefix + "/")):
        root, path = root + prefix, path[len(prefix):] or "/"
    return root, path


def secured(response: Response) -> Response:
    """The response with the headers every answer carries: never from a cache unless
    it says otherwise (static files), and the security headers."""
    response.headers.setdefault("Cache-Control", "no-store")
    for name, value in SECURITY_HEADERS:
        response.headers[name] = value
    return response


def json_response(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=str), status, mimetype="application/json")


def redirect(location: str) -> Response:
    """303: after a POST, the browser GETs the page again (a reload does not repeat it)."""
    return Response(status=303, headers=[("Location", location)])


class JobIdConverter(BaseConverter):
    """A job id in a path: ASCII digits that fit a BIGINT; a larger one is no page."""
    regex = JOB_ID_DIGITS

    def to_python(self, value: str) -> int:
        if int(value) > MAX_JOB_ID:
            raise ValidationError()
        return int(value)


Handler = Callable[..., Response]


class Routes:
    """(method, werkzeug rule, handler(request, **values)); HEAD answers as GET does."""

    def __init__(self, table: Sequence[tuple[str, str, Handler]]) -> None:
        self._map = Map([Rule(path, methods=[method], endpoint=handler)
                         for method, path, handler in table],
                        converters={"job": JobIdConverter}, strict_slashes=False,
                        merge_slashes=False)   # never a redirect: a path is found or not

    def find(self, request: Request) -> tuple[Handler, dict[str, Any]]:
        """The handler and its path values; NotFound, MethodNotAllowed (with Allow)."""
        adapter = self._map.bind("dashboard", script_name=request.root)
        try:
            handler, values = adapter.match(request.route_path, request.method)
        except NotFound:
            raise NotFound("no such page") from None
        except MethodNotAllowed as exc:
            raise MethodNotAllowed(exc.valid_methods,
                                   f"{request.method} is not allowed here") from None
        return handler, dict(values)
