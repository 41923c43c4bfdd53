"""The small WSGI layer the dashboard needs, on the standard library alone: a request
(query, form, cookies, where it came from), a response with the security headers
every answer carries, and a table of routes.

Written here rather than taken from werkzeug: the dashboard needs a dozen routes,
urlencoded forms and one cookie, which is about a hundred lines; one dependency
less to install, audit and keep current on every host that serves the page.
"""
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .auth import Session

MAX_FORM_BYTES = 256 * 1024   # the largest form: a page of selected job ids

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

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
Environ = Mapping[str, Any]


class HTTPError(Exception):
    """Answer with this status and a one-line message (HTML or JSON as the path asks)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    def __init__(self, environ: Environ, prefix: str = "") -> None:
        self.environ = environ
        self.method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        self.root, self.path = _split_prefix(environ, prefix)
        self.query = _first_values(parse_qs(str(environ.get("QUERY_STRING", "")),
                                            keep_blank_values=True))
        self._form: dict[str, list[str]] | None = None
        self.session: Session | None = None   # the live login session, set by the app

    # -- where it came from ------------------------------------------------------------
    @property
    def secure(self) -> bool:
        """Over HTTPS, as the WSGI server says: behind a proxy, the server's own setting
        for trusting X-Forwarded-Proto (gunicorn's --forwarded-allow-ips) decides."""
        return self.environ.get("wsgi.url_scheme") == "https"

    @property
    def host(self) -> str:
        return str(self.environ.get("HTTP_HOST") or "")

    @property
    def remote_addr(self) -> str:
        return str(self.environ.get("REMOTE_ADDR") or "")

    def header(self, name: str) -> str:
        return str(self.environ.get("HTTP_" + name.upper().replace("-", "_")) or "")

    def same_origin(self) -> bool:
        """The Origin header (or, without one, the Referer) names this Host: the request
        comes from our own page, not from another site's form or script."""
        source = self.header("Origin") or self.header("Referer")
        if not source or source == "null" or not self.host:
            return False
        try:
            parts = urlsplit(source)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.netloc.lower() == self.host.lower()

    # -- what it carries -----------------------------------------------------------------
    def arg(self, name: str) -> str:
        return self.query.get(name, [""])[0].strip()

    @property
    def form(self) -> dict[str, list[str]]:
        if self._form is None:
            self._form = self._read_form()
        return self._form

    def form_value(self, name: str) -> str:
        return self.form.get(name, [""])[0]

    def _read_form(self) -> dict[str, list[str]]:
        if not str(self.environ.get("CONTENT_TYPE", "")).startswith(
                "application/x-www-form-urlencoded"):
            return {}
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "bad Content-Length") from None
        if length > MAX_FORM_BYTES:
            raise HTTPError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "form too large")
        body = self.environ["wsgi.input"].read(length) if length > 0 else b""
        try:
            return parse_qs(body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "the form is not UTF-8") from None

    def cookie(self, name: str) -> str | None:
        try:
            jar = SimpleCookie(str(self.environ.get("HTTP_COOKIE", "")))
        except CookieError:
            return None
        morsel = jar.get(name)
        return morsel.value if morsel else None


def _first_values(parsed: dict[str, list[str]]) -> dict[str, list[str]]:
    return {key: values for key, values in parsed.items() if values}


def _split_prefix(environ: Environ, prefix: str) -> tuple[str, str]:
    """(root, path): SCRIPT_NAME as the WSGI server set it (gunicorn behind a proxy that
    passes it), plus the configured prefix when the path still starts with it (a proxy
    that forwards the whole path)."""
    root = str(environ.get("SCRIPT_NAME", "")).rstrip("/")
    path = str(environ.get("PATH_INFO", "")) or "/"
    if prefix and (path == prefix or path.startswith(prefix + "/")):
        root, path = root + prefix, path[len(prefix):] or "/"
    return root, path


@dataclass
class Response:
    body: bytes = b""
    status: HTTPStatus = HTTPStatus.OK
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)
    cache: str = "no-store"   # pages and data: never from a cache

    def send(self, start_response: StartResponse) -> Iterable[bytes]:
        headers = [("Content-Type", self.content_type), ("Content-Length", str(len(self.body))),
                   ("Cache-Control", self.cache), *SECURITY_HEADERS, *self.headers]
        start_response(f"{self.status.value} {self.status.phrase}", headers)
        return [self.body]


def json_response(data: Any, status: HTTPStatus = HTTPStatus.OK) -> Response:
    return Response(json.dumps(data, default=str).encode("utf-8"), status,
                    "application/json; charset=utf-8")


def redirect(location: str) -> Response:
    """303: after a POST, the browser GETs the page again (a reload does not repeat it)."""
    return Response(b"", HTTPStatus.SEE_OTHER, headers=[("Location", location)])


Handler = Callable[..., Response]


class Routes:
    """(method, path pattern) -> handler(request, **groups); patterns are whole-path regexes."""

    def __init__(self) -> None:
        self._table: list[tuple[str, re.Pattern[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._table.append((method, re.compile(pattern), handler))

    def find(self, method: str, path: str) -> tuple[Handler, dict[str, str]]:
        allowed = False
        for route_method, pattern, handler in self._table:
            match = pattern.fullmatch(path)
            if match:
                if route_method == method or (method == "HEAD" and route_method == "GET"):
                    return handler, match.groupdict()
                allowed = True
        if allowed:
            raise HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed here")
        raise HTTPError(HTTPStatus.NOT_FOUND, "no such page")
