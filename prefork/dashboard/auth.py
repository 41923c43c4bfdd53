"""Who may act: the dashboard password, login sessions, their CSRF tokens, the
login rate limit, and the enqueue endpoint's token.

Read-only unless a password is configured (PREFORK_QUEUE_DASHBOARD_PASSWORD or
dashboard_password_file, never a flag or the config file). A login gets a random
session id (kept in memory only: a restart logs everyone out) and a CSRF token of
its own, which every state-changing request must carry. The enqueue endpoint is
off unless its token is configured the same way (dashboard_enqueue_token); a
producer sends it in every request, as `Authorization: Bearer TOKEN`.
"""
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from werkzeug.wrappers import Response

from ..config import read_password_file
from ..errors import UserError

SESSION_COOKIE = "prefork_dashboard"
SESSION_IDLE_SECONDS = 12 * 3600
MAX_SESSIONS = 1000
# Failed logins: at most LOGIN_FAILURES per address in LOGIN_WINDOW seconds, and each
# wrong password is answered only after FAILED_LOGIN_DELAY.
LOGIN_FAILURES = 5
LOGIN_WINDOW = 300.0
FAILED_LOGIN_DELAY = 1.0


MIN_TOKEN_LENGTH = 32   # the enqueue token: guessing it must be hopeless


def configured_secret(config: Any, name: str) -> str | None:
    """The secret setting `name` (dashboard_password, dashboard_enqueue_token) from the
    environment, or the first line of the file its `<name>_file` setting names
    (checked private, as db_password_file is); None when neither is set."""
    value = getattr(config, name)
    if value:
        return str(value)
    path = getattr(config, f"{name}_file")
    if not path:
        return None
    secret = read_password_file(path, f"{name}_file", config.db_password_file_mode_check)
    if not secret:
        raise UserError(f"{name}_file {path!r} is empty")
    return secret


def configured_enqueue_token(config: Any) -> str | None:
    """The enqueue endpoint's token, or None: the endpoint is off."""
    token = configured_secret(config, "dashboard_enqueue_token")
    if token is None:
        return None
    token = token.strip()
    if len(token) < MIN_TOKEN_LENGTH:
        raise UserError(f"dashboard_enqueue_token has {len(token)} characters: use at least "
                        f"{MIN_TOKEN_LENGTH} random ones (e.g. `openssl rand -hex 32`)")
    return token


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_seen: float = field(default_factory=time.monotonic)
    # What the last action did, for the next page this session shows (once). Two
    # pages loading at the same moment may both show it: nothing worse.
    notice: str = ""

    def take_notice(self) -> str:
        notice, self.notice = self.notice, ""
        return notice


class Gate:
    """The password, the live sessions and the failed-login counts of one app."""

    def __init__(self, password: str | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._password = password.encode("utf-8") if password else None
        self._sessions: dict[str, Session] = {}
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    @property
    def read_only(self) -> bool:
        return self._password is None

    # -- logging in ---------------------------------------------------------------------
    def locked_out(self, address: str) -> bool:
        """Too many wrong passwords from this address lately."""
        with self._lock:
            return len(self._recent_failures(address)) >= LOGIN_FAILURES

    def log_in(self, address: str, password: str) -> str | None:
        """A new session id for the right password; None (after a delay) for a wrong one."""
        given = password.encode("utf-8")
        # Constant time: the comparison takes as long whatever prefix matches.
        if self._password is not None and hmac.compare_digest(given, self._password):
            return self._new_session()
        with self._lock:
            self._recent_failures(address).append(self._clock())
        time.sleep(FAILED_LOGIN_DELAY)
        return None

    def _recent_failures(self, address: str) -> list[float]:
        since = self._clock() - LOGIN_WINDOW
        recent = [at for at in self._failures.get(address, []) if at > since]
        self._failures[address] = recent
        return recent

    def _new_session(self) -> str:
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._forget_idle()
            if len(self._sessions) >= MAX_SESSIONS:   # the oldest make room
                oldest = min(self._sessions, key=lambda key: self._sessions[key].last_seen)
                del self._sessions[oldest]
            self._sessions[session_id] = Session()
        return session_id

    def _forget_idle(self) -> None:
        since = self._clock() - SESSION_IDLE_SECONDS
        for key in [key for key, session in self._sessions.items() if session.last_seen < since]:
            del self._sessions[key]

    # -- using a session ----------------------------------------------------------------------
    def session(self, session_id: str | None) -> Session | None:
        """The live session of this cookie value, or None."""
        if not session_id or self.read_only:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.last_seen < self._clock() - SESSION_IDLE_SECONDS:
                self._sessions.pop(session_id, None)
                return None
            session.last_seen = self._clock()
            return session

    def log_out(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)


def token_matches(session: Session, given: str) -> bool:
    return hmac.compare_digest(session.csrf.encode("utf-8"), given.encode("utf-8"))


def bearer_matches(token: str, authorization: str) -> bool:
    """Whether an Authorization header is `Bearer <token>`. Compared in constant time,
    as digests of equal length: neither the token nor its length leaks by timing."""
    scheme, _, given = authorization.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        _digest(token), _digest(given.strip()))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


def set_session_cookie(response: Response, session_id: str, path: str, secure: bool,
                       max_age: int | None = None) -> None:
    """HttpOnly (no script reads it), SameSite=Strict (no other site's request carries
    it), Secure over HTTPS: as the WSGI server says (wsgi.url_scheme; behind a proxy,
    the server's own setting for trusting X-Forwarded-Proto decides, as gunicorn's
    --forwarded-allow-ips)."""
    response.set_cookie(SESSION_COOKIE, session_id, max_age=max_age, path=path or "/",
                        secure=secure, httponly=True, samesite="Strict")
