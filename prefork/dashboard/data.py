"""What the pages and the JSON API show, shaped from the store's answers: filters read
from a request, a job with its payload redacted, the overview, the schedules.

Every read here is one of the store's indexed reads (queue_overview, throughput,
find_jobs, get, status, limit_usage): nothing counts or scans done rows."""
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Sequence

from werkzeug.exceptions import BadRequest, NotFound

from ..cli import status_report
from ..jobs import JobStatus, utc_now
from .. import schedules
from ..results import JobResult
from ..store.contract import JobRow, Store
from ..store.views import JobFilter, JobPage
from ..times import utc_iso
from ..worker import commands
from .web import JOB_ID_DIGITS, MAX_JOB_ID, Request

MASK = "[redacted]"
PAGE_SIZE = 50
RANGES = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
# The filters of the Jobs and Dead jobs pages, as query-string names.
FILTER_ARGS = ("queue", "status", "type", "id", "key", "from", "to")
JOB_ID = re.compile(JOB_ID_DIGITS)
# The times a filter may name: the stores' DATETIME range, a day inside it (the
# search widens a time range by a minute).
FIRST_TIME, LAST_TIME = datetime(1000, 1, 2), datetime(9999, 12, 30)


# -- filters ---------------------------------------------------------------------------

def job_filter(values: Mapping[str, str], status: JobStatus | None = None) -> JobFilter:
    """The JobFilter of a query string's (or form's) values; 400 naming a bad one."""
    return JobFilter(queue=values.get("queue") or None,
                     status=status or _status(values.get("status", "")),
                     job_type=values.get("type") or None,
                     job_id=optional_job_id(values.get("id", ""), "id"),
                     key_prefix=values.get("key") or None,
                     created_from=_utc_time(values.get("from", ""), "from"),
                     created_to=_utc_time(values.get("to", ""), "to"))


def filter_values(request: Request) -> dict[str, str]:
    return {name: request.arg(name) for name in FILTER_ARGS}


def job_id(text: str, name: str) -> int:
    """The job id given as `name`; 400 naming it when it is none."""
    if not JOB_ID.fullmatch(text) or int(text) > MAX_JOB_ID:
        raise BadRequest(f"{name} must be a job id (a whole number up to {MAX_JOB_ID})")
    return int(text)


def optional_job_id(text: str, name: str) -> int | None:
    return job_id(text, name) if text else None


def _status(text: str) -> JobStatus | None:
    if not text:
        return None
    try:
        return JobStatus(text)
    except ValueError:
        raise BadRequest(f"unknown state {text!r}: use one of "
                        f"{', '.join(status.value for status in JobStatus)}") from None


def _utc_time(text: str, name: str) -> datetime | None:
    """An ISO time (a browser's datetime-local value), UTC unless it names a zone."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is not None:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    except ValueError:
        raise BadRequest(f"{name} must be a time like 2026-12-01T03:00 (UTC)") from None
    except OverflowError:   # in UTC, before the year 1 or after 9999
        moment = datetime.min
    if not FIRST_TIME <= moment <= LAST_TIME:
        raise BadRequest(f"{name} must be a time from {FIRST_TIME:%Y-%m-%d} to "
                         f"{LAST_TIME:%Y-%m-%d} (UTC)")
    return moment


# -- jobs ---------------------------------------------------------------------------------

def job_list(page: JobPage) -> dict[str, Any]:
    return {"rows": [plain(row) for row in page.rows], "next_after": page.next_after}


def job_row(store: Store, job_id: int) -> JobRow:
    """One job's row and what it left behind: a done job's result (None: none, or
    expired) and the tracebacks of its last failed attempts (two reads by the job's id)."""
    row = store.get(job_id)
    if row is None:
        raise NotFound(f"no job {job_id}")
    result = store.job_result(job_id) if row["status"] == JobStatus.DONE else None
    return {**row, "result": result, "tracebacks": store.failed_attempts(job_id)}


def job_detail(row: JobRow, redact_keys: Sequence[str]) -> dict[str, Any]:
    """Every field of a job; the payload and the result pretty-printed with the redacted
    keys masked, the error history and the kept tracebacks as lists; no lease token (it
    would let a reader complete it)."""
    detail = plain({key: value for key, value in row.items()
                    if key not in ("payload", "error_history", "lease_token", "result",
                                   "tracebacks")})
    detail["payload"] = pretty_payload(str(row.get("payload") or ""), redact_keys)
    detail["error_history"] = _history(row.get("error_history"))
    result: JobResult | None = row.get("result")
    detail["result"] = None if result is None else pretty_json(result.value, redact_keys)
    expires = result.expires_at if result else None
    detail["result_expires_at"] = utc_iso(expires) if expires else None
    detail["tracebacks"] = [plain(vars(kept)) for kept in row.get("tracebacks", [])]
    return detail


def pretty_payload(text: str, redact_keys: Sequence[str]) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return MASK + " (not JSON)"
    return pretty_json(value, redact_keys)


def pretty_json(value: Any, redact_keys: Sequence[str]) -> str:
    """JSON (a payload, a result) indented, the values of the redacted keys masked."""
    return json.dumps(redact(value, {key.lower() for key in redact_keys}), indent=2,
                      ensure_ascii=False, sort_keys=True)


def redact(value: Any, keys: set[str]) -> Any:
    """`value` with the values of keys named in `keys` (lower case) masked, at any depth."""
    if isinstance(value, dict):
        return {key: MASK if str(key).lower() in keys else redact(item, keys)
                for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, keys) for item in value]
    return value


def _history(text: Any) -> list[dict[str, Any]]:
    if not text:
        return []
    try:
        entries = json.loads(text)
    except ValueError:
        return []
    return [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []


def plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row for JSON and templates: times as every time is shown (times.py), enums as
    their words."""
    return {key: _plain_value(value) for key, value in row.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc_iso(value)
    if isinstance(value, JobStatus):
        return value.value
    return value


# -- the overview ------------------------------------------------------------------------------

def overview(store: Store, heartbeat_interval: float) -> dict[str, Any]:
    """Per queue figures (from the claim index and the rollup), the limited groups (as
    `status` shows them) and the supervisors."""
    return {"queues": queues(store), "limits": status_report.limits(store.limit_usage()),
            "supervisors": supervisors(store, heartbeat_interval),
            "now": utc_iso(datetime.now(timezone.utc))}


def queues(store: Store) -> list[dict[str, Any]]:
    """Every known queue's figures (vars(): a shallow copy, asdict() deep-copies)."""
    return [plain(vars(item)) for item in store.queue_overview()]


def supervisors(store: Store, heartbeat_interval: float) -> list[dict[str, Any]]:
    """The running supervisors as `status` reports them (their rows only: the counts
    come from queue_overview)."""
    report = status_report.build((store.running_processes(), [], {}, set()),
                                 heartbeat_interval)
    rows: list[dict[str, Any]] = report["supervisors"]
    return rows


def throughput(store: Store, span: str, queue: str | None) -> dict[str, Any]:
    if span not in RANGES:
        raise BadRequest("range must be hour or day")
    since = utc_now() - RANGES[span]
    points = store.throughput(since, queue)
    return {"range": span, "points": [plain(vars(point)) for point in points]}


def hosts(store: Store) -> list[str]:
    return sorted({str(sup["host"]) for sup in supervisors(store, 1.0)})


# -- schedules ---------------------------------------------------------------------------------

def schedule_rows(store: Store, config: Any) -> list[dict[str, Any]]:
    """Each [schedule:*] of the config: its timing, next tick and newest enqueued job.

    The dashboard imports no application, so a schedule's type is taken as known
    (the supervisor checks it against its handlers when it starts)."""
    specs = commands.build(config)
    named = {keys.get("type", "") for keys in config.named("schedule").values()}
    now = datetime.now(timezone.utc)
    rows = []
    for name, schedule in schedules.build(config, named, specs).items():
        last = store.find_jobs(JobFilter(queue=schedule.job.queue,
                                         key_prefix=f"schedule:{name}:"), None, 1)
        rows.append({"name": name, "type": schedule.job.type, "queue": schedule.job.queue,
                     "timing": schedule.cron or f"every {schedule.every}s",
                     "timezone": str(schedule.zone),
                     "next_tick": utc_iso(schedule.next_after(now)),
                     "last_job": plain(last.rows[0]) if last.rows else None})
    return rows
