"""What a failed attempt leaves behind: its error text for the job row (the class
and message, credentials masked and cut to a bound, or the class only), its
traceback for the worker's log and for the job (which keeps its last
TRACEBACKS_KEPT attempts' ones), and the job's short history of failed attempts.

`error_detail = class` keeps everything we write (row, history, log lines,
tracebacks) to the class, for teams whose exception messages may carry personal
data; a traceback then keeps its frames and ends in the class alone.
"""
import enum
import json
import re
import traceback
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from .times import utc_iso

MAX_ERROR_LENGTH = 1000   # characters of an error kept in the row and the history
CUT = "\u2026"            # ends an error cut to MAX_ERROR_LENGTH (an ellipsis)
MASK = "***"
HISTORY_LENGTH = 10       # failed attempts a job keeps, newest last
TRACEBACKS_KEPT = 3       # failed attempts whose traceback a job keeps, the last ones
TRACEBACK_CHARS = 20_000  # characters of a kept traceback: its end (where it was raised)
CLASS_PATH_LENGTH = 255   # characters of an exception's class path (its column's width)
# The password of a URL's userinfo: scheme://user:PASSWORD@host
URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*):[^\s@/]*@")
DRIVER_MODULES = ("pymysql.err", "sqlite3")


class ErrorDetail(enum.StrEnum):
    """The `error_detail` setting: what we write of an exception we did not raise."""
    MESSAGE = "message"   # class and message, masked and cut
    CLASS = "class"       # class only


def error_class(exc: BaseException) -> str:
    """What we may say about an exception under `error_detail = class`: its class,
    module-qualified unless built in, never its message."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def message_of(exc: BaseException) -> str:
    """The exception's own message; a broken __str__ is not the job's second failure."""
    try:
        return str(exc)
    except Exception:   # whatever a user's __str__ raises
        return "<the exception's message could not be read>"


def database_error(exc: BaseException) -> str:
    """A driver's error with what failed: 'OperationalError 1142: INSERT command denied
    to user ...' (PyMySQL: the server's code and message), 'OperationalError: no such
    table: invoices' (sqlite3). Not masked: see describe()."""
    name = type(exc).__qualname__
    args = exc.args
    if len(args) >= 2 and isinstance(args[0], int):   # PyMySQL: (code, server message)
        return f"{name} {args[0]}: {args[1]}"
    message = message_of(exc)
    return f"{name}: {message}" if message else name


def full_text(exc: BaseException) -> str:
    """Class and message, unmasked and uncut: a driver's error by its short class name
    and code (its module says nothing an operator needs), any other by error_class."""
    if type(exc).__module__ in DRIVER_MODULES:
        return database_error(exc)
    message = message_of(exc)
    return f"{error_class(exc)}: {message}" if message else error_class(exc)


@dataclass(frozen=True)
class FailedAttempt:
    """What a job keeps of a failed attempt beside its error: the exception's class
    path (module.qualname, builtins named so: an importable name, never a message)
    and its traceback, as the log has it, cut to its last TRACEBACK_CHARS."""
    class_path: str
    traceback: str


@dataclass(frozen=True)
class AttemptTraceback:
    """A failed attempt's traceback, as a job keeps it (Store.failed_attempts())."""
    attempt: int
    worker: str              # host:pid that ran it
    finished_at: datetime    # naive UTC
    class_path: str
    traceback: str


def class_path(exc: BaseException) -> str:
    cls = type(exc)
    return storable(f"{cls.__module__}.{cls.__qualname__}")[:CLASS_PATH_LENGTH]


def kept_traceback(text: str) -> str:
    """The traceback, storable, its last TRACEBACK_CHARS characters (starting with CUT
    when cut)."""
    text = storable(text)
    return text if len(text) <= TRACEBACK_CHARS else CUT + text[-(TRACEBACK_CHARS - len(CUT)):]


def failed_attempt(exc: BaseException, traceback_text: str) -> FailedAttempt:
    """What a job keeps of a failure whose traceback (ErrorWriter.traceback()) is this."""
    return FailedAttempt(class_path(exc), kept_traceback(traceback_text))


class ErrorWriter:
    """Turns exceptions into the text we store and log, per the error_detail setting,
    masking the configured database password and any URL's password."""

    def __init__(self, detail: str = ErrorDetail.MESSAGE, password: str | None = None) -> None:
        self.detail = ErrorDetail(detail)
        # The password as given and as a URL carries it (percent-encoded).
        self.secrets = sorted({password, quote(password, safe="")} if password else set(),
                              key=len, reverse=True)

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return URL_PASSWORD.sub(rf"\1:{MASK}@", text)

    def describe(self, exc: BaseException) -> str:
        """The error of a failed attempt, as the job row and the history keep it."""
        if self.detail is ErrorDetail.CLASS:
            return error_class(exc)
        return bounded(self.mask(full_text(exc)))

    def traceback(self, exc: BaseException) -> str:
        """The traceback for the worker's log: whole (chained exceptions too) and
        masked. Under `class`: where it was raised (each frame's file, line and
        function, without the source line, which may quote a message) and the class."""
        if self.detail is ErrorDetail.CLASS:
            frames = "".join(f'  File "{frame.f_code.co_filename}", line {line}, '
                             f"in {frame.f_code.co_name}\n"
                             for frame, line in traceback.walk_tb(exc.__traceback__))
            return f"Traceback (most recent call last):\n{frames}{error_class(exc)}"
        # Masked: a source line may quote a URL with its password.
        return storable(self.mask("".join(traceback.format_exception(exc)).rstrip()))


def storable(text: str) -> str:
    """The text with any lone surrogate (an undecodable byte smuggled into a str)
    escaped: neither backend, nor a UTF-8 log, can take one."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def bounded(text: str) -> str:
    """The text, storable, cut to MAX_ERROR_LENGTH with CUT as its last character if longer."""
    text = storable(text)
    return text if len(text) <= MAX_ERROR_LENGTH else text[:MAX_ERROR_LENGTH - len(CUT)] + CUT


def appended_history(history: str | None, attempt: int, at: datetime, error: str) -> str:
    """A job's history of failed attempts (JSON text: [{attempt, at, error}], oldest
    first) with this one added, keeping the last HISTORY_LENGTH. `at` is naive UTC."""
    entries = parsed_history(history)
    entries.append({"attempt": attempt, "at": utc_iso(at), "error": error})
    return json.dumps(entries[-HISTORY_LENGTH:], ensure_ascii=False, separators=(",", ":"))


def parsed_history(history: str | None) -> list[dict[str, object]]:
    """The stored history as a list (none yet, or text that is not ours: empty)."""
    try:
        entries = json.loads(history) if history else []
    except ValueError:
        return []
    return entries if isinstance(entries, list) else []

