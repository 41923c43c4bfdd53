"""`prefork-queue status`: what every supervisor and queue is doing, from the store's
raw status rows, as a table for people or JSON for scripts.

Ages are on the database's clock (the store computes them); what a supervisor's
workers do is as of its last heartbeat, and a supervisor silent for more than
STALE_BEATS of its own heartbeat intervals is marked stale (killed or hung: its row
stays "running" until another supervisor prunes it)."""
import json
from datetime import datetime
from typing import Any, Sequence

from ..jobs import JobStatus
from ..limits.rules import NO_KEY, LimitUsage
from ..store.registry_rows import interval_of, is_stale
from ..times import utc_iso

# {"supervisors": [...], "queues": {name: {column: value}}, "limits": [...]}, as JSON
# prints it.
Report = dict[str, Any]
Row = dict[str, Any]

DONE_WINDOW = 3600.0
QUEUE_COLUMNS = ("ready", "delayed", "reserved", "dead", "cancelled", "waiting",
                 "done_last_hour")


def build(raw: tuple[Sequence[Row], Sequence[tuple[Any, ...]], dict[str, int], Any],
          heartbeat_interval: float) -> Report:
    """The report from Store.status(): {"supervisors": [...], "queues": {...}}; a
    supervisor is stale when its heartbeat is older than STALE_BEATS of its own
    intervals (`heartbeat_interval`, the reader's, for a row that has none)."""
    processes, live, done, paused = raw
    queues: dict[str, Row] = {}

    def queue(name: str) -> Row:
        return queues.setdefault(name, dict.fromkeys(QUEUE_COLUMNS, 0,) | {
            "oldest_ready_age_s": None, "jobs_per_min": 0.0, "paused": name in paused})

    for name, status, due, count, oldest_age in live:
        row = queue(name)
        if status == JobStatus.READY and not due:
            row["delayed"] += count
        else:
            row[status] += count
        if status == JobStatus.READY and due:
            row["oldest_ready_age_s"] = round(float(oldest_age), 3)
    for name, count in done.items():
        queue(name)["done_last_hour"] = count
        queue(name)["jobs_per_min"] = round(count / (DONE_WINDOW / 60), 2)
    for name in paused:
        queue(name)
    return {"supervisors": [_supervisor(process, heartbeat_interval) for process in processes],
            "queues": dict(sorted(queues.items()))}


def _supervisor(process: Row, heartbeat_interval: float) -> Row:
    return {"id": process["id"], "host": process["host"], "pid": process["pid"],
            "queues": process["queues"].split(","), "workers": process["workers"],
            "version": process["version"], "started_at": utc_text(process["started_at"]),
            "heartbeat_at": utc_text(process["heartbeat_at"]),
            "heartbeat_age_s": round(float(process["heartbeat_age_s"]), 1),
            "heartbeat_interval_s": interval_of(process, heartbeat_interval),
            "stale": is_stale(process, heartbeat_interval),
            "children": json.loads(process["children"] or "[]")}


def limits(usage: Sequence[LimitUsage]) -> list[Row]:
    """Each limited group with jobs running or waiting: its type, concurrency key (""
    for the type's jobs without one), running, concurrency limit and rate (None: no
    such limit) of the published rule, the one every supervisor's claims enforce,
    waiting (due, not started)."""
    return [{"type": group.job_type, "key": group.key, "running": group.running,
             "limit": group.concurrency, "rate": None if group.rate is None else str(group.rate),
             "waiting": group.waiting} for group in usage]


def utc_text(moment: datetime) -> str:
    """A store's naive UTC time as every time is shown (times.py):
    2026-12-01T08:00:00.000+00:00."""
    return utc_iso(moment)


def render(report: Report) -> str:
    """The report as text for a terminal."""
    lines = ["SUPERVISORS"]
    if not report["supervisors"]:
        lines.append("  (none running)")
    for sup in report["supervisors"]:
        age = sup["heartbeat_age_s"]
        stale = f"  STALE: no heartbeat for {age}s" if sup["stale"] else ""
        lines.append(f"  {sup['host']}:{sup['pid']}  [{','.join(sup['queues'])}]{stale}  "
                     f"workers {len(sup['children'])}/{sup['workers']} as of {age}s ago  "
                     f"since {sup['started_at']}  v{sup['version']}")
        for child in sup["children"]:
            doing = (f"busy job {child['job_id']} {child['type']} {child['seconds']}s"
                     if child.get("job_id") else child["state"])
            lines.append(f"    worker {child['slot']} pid {child['pid']}: {doing}")
    lines += ["", *table(QUEUE_HEADER, [_queue_cells(name, row)
                                         for name, row in report["queues"].items()])]
    return "\n".join(lines + _limit_lines(report.get("limits", [])))


QUEUE_HEADER = ("QUEUE", "READY", "DELAYED", "RESERVED", "DEAD", "CANCELLED", "WAITING",
                "DONE/1H", "JOBS/MIN", "OLDEST READY")
LIMIT_HEADER = ("TYPE", "KEY", "RUNNING", "LIMIT", "RATE", "WAITING")


def table(header: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1,
          indent: str = "") -> list[str]:
    """The lines of a table whose columns are as wide as their widest cell (a long
    queue name widens its column, never shifts a row): the first `left` columns
    aligned left, the others (counts) right, two spaces between columns."""
    cells = [[str(cell) for cell in row] for row in (header, *rows)]
    widths = [max(len(column) for column in columns) for columns in zip(*cells)]
    return [indent + "  ".join(cell.ljust(width) if number < left else cell.rjust(width)
                               for number, (cell, width) in enumerate(zip(row, widths))).rstrip()
            for row in cells]


def _queue_cells(name: str, row: Row) -> list[object]:
    oldest = "-" if row["oldest_ready_age_s"] is None else f"{row['oldest_ready_age_s']:.1f}s"
    return [f"{name} (paused)" if row["paused"] else name, row["ready"], row["delayed"],
            row["reserved"], row["dead"], row["cancelled"], row["waiting"], row["done_last_hour"],
            row["jobs_per_min"], oldest]


def _limit_lines(groups: Sequence[Row]) -> list[str]:
    """The Limits section: a line per group with jobs running or waiting."""
    if not groups:
        return []
    rows = [[group["type"], "(none)" if group["key"] == NO_KEY else group["key"],
             group["running"], "-" if group["limit"] is None else group["limit"],
             group["rate"] or "-", group["waiting"]] for group in groups]
    return ["", "LIMITS", *table(LIMIT_HEADER, rows, left=2, indent="  ")]
