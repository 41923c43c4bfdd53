"""Sentry for failed attempts: every failed attempt of a job is reported to Sentry,
with the job's type, queue, id and attempt as tags, without its payload unless asked.

Enabled by the configuration (``sentry_dsn`` from the environment, or
``sentry_dsn_file``; ``sentry_send_payload``), read when the supervisor or ``work``
starts, or by the application calling init(). Needs the ``sentry`` extra
(``pip install 'prefork-queue[sentry]'``); prefork imports this module, and with it
the Sentry SDK, only then.

A report is an on_failure hook (prefork.registry): it runs in the worker once the
failure is recorded, bounded by hook_timeout, and cannot change the job. Its level is
``warning`` for an attempt that is retried and ``error`` for one that sends its job to
dead. The exception's message in it is the one the job row keeps (masked, cut, or
none under ``error_detail = class``); chained exceptions show their class and frames.
"""
from typing import Any, Optional
from urllib.parse import urlsplit

import sentry_sdk
from sentry_sdk.types import Event as SentryEvent
from sentry_sdk.utils import BadDsn

from ... import registry
from ...config import Config, read_password_file
from ...errors import UserError
from ...events import Event
from ...failures import error_class
from ...logs import event
from ...worker.attempt import JobAttempt

_send_payload = False


def init(dsn: Optional[str] = None, *, send_payload: bool = False, **options: Any) -> None:
    """Report every failed attempt to Sentry from now on. Call it where the application
    registers its handlers (before the supervisor forks its workers).

    dsn: set the Sentry SDK up for these reports alone: ``sentry_sdk.init(dsn,
    **options)`` with the SDK's default integrations off (prefork's log is not sent).
    Without it, the SDK the application set up itself (``sentry_sdk.init`` in Django's
    settings, say) sends them; ValueError if there is none.

    send_payload: attach the job's payload to each report (extra ``prefork.payload``),
    and, when dsn is given, the local variables of the traceback's frames, which may
    hold it. Off by default: a report names the job, never its data.
    """
    global _send_payload
    if dsn is not None:
        options.setdefault("default_integrations", False)
        options.setdefault("auto_enabling_integrations", False)
        options.setdefault("include_local_variables", send_payload)
        sentry_sdk.init(dsn=dsn, **options)
    client = sentry_sdk.get_client()
    if not client.is_active():
        raise ValueError("prefork.contrib.sentry.init(): no dsn given and the Sentry SDK is "
                         "not set up (call sentry_sdk.init() first, or pass dsn=)")
    _send_payload = send_payload
    registry.on_failure(report)
    event(Event.SENTRY_ENABLED, host=urlsplit(str(client.dsn)).hostname,
          send_payload=send_payload)


def init_from(config: Config) -> None:
    """init() as the configuration says, when it names a DSN (sentry_dsn, or the first
    line of sentry_dsn_file); a one-line UserError for a DSN that is not one."""
    dsn = config.sentry_dsn
    if not dsn and config.sentry_dsn_file:
        dsn = read_password_file(config.sentry_dsn_file, "sentry_dsn_file",
                                 config.db_password_file_mode_check)
        if not dsn:
            raise UserError(f"sentry_dsn_file {config.sentry_dsn_file!r} is empty")
    if not dsn:
        return
    try:
        init(dsn, send_payload=config.sentry_send_payload)
    except BadDsn:   # its message would quote the DSN, and the DSN holds the key
        raise UserError("sentry_dsn is not a Sentry DSN (https://KEY@HOST/PROJECT)") from None


def report(attempt: JobAttempt) -> None:
    """The on_failure hook: one Sentry event for a failed attempt, sent before it
    returns (a worker forked per job exits right after its job)."""
    if attempt.exception is None:
        return
    with sentry_sdk.new_scope() as scope:
        scope.set_level("error" if attempt.dead else "warning")
        for name, value in (("job_type", attempt.type), ("queue", attempt.queue),
                            ("job_id", attempt.job_id), ("attempt", attempt.number),
                            ("outcome", attempt.outcome)):
            scope.set_tag(f"prefork.{name}", str(value))
        scope.set_context("prefork_job", {
            "id": attempt.job_id, "type": attempt.type, "queue": attempt.queue,
            "attempt": attempt.number, "max_attempts": attempt.max_attempts,
            "outcome": str(attempt.outcome), "retry_in_s": attempt.retry_in})
        if _send_payload:
            scope.set_extra("prefork.payload", attempt.payload())
        scope.add_event_processor(lambda sent, hint: with_row_error(sent, attempt))
        scope.capture_exception(attempt.exception)
    sentry_sdk.flush()


def with_row_error(sent: SentryEvent, attempt: JobAttempt) -> SentryEvent:
    """The event with its exceptions' messages replaced: the last (the one raised) by
    the job row's error, the chained ones by none."""
    values = sent.get("exception", {}).get("values") or []
    for value in values:
        value["value"] = ""
    if values:
        values[-1]["value"] = row_message(attempt)
    return sent


def row_message(attempt: JobAttempt) -> str:
    """The job row's error without the exception's class, which Sentry shows beside it:
    "customer 42 has no billing address", "1142: INSERT command denied ...", or
    nothing under error_detail = class. Our own errors ("soft timeout after 2s") are
    the message whole."""
    error = attempt.error or ""
    if attempt.exception is None:
        return error
    for name in (error_class(attempt.exception), type(attempt.exception).__qualname__):
        if error.startswith(name):
            return error[len(name):].removeprefix(":").strip()
    return error
