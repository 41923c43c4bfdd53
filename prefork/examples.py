"""Example handlers shipped with prefork-queue, to watch jobs flow on a first run.

    prefork-queue --workers 8     # no --app and the default SQLite file: these handlers
    # in a second terminal (same directory):
    prefork-queue enqueue sleep '{"seconds": 5}'
    prefork-queue enqueue fail-n-times '{"times": 2}'
    prefork-queue enqueue report '{"title": "weekly"}' --key weekly

- `sleep`: sleeps payload["seconds"] (default 1, at most 600), then completes.
  Long enough to see a busy worker in `top -c` or `ps`.
- `fail-n-times`: fails with a transient error on its first payload["times"]
  attempts (default 1), then succeeds: the retries back off. With times at or
  above the job's max attempts it ends in `dead` (see `prefork-queue failed`).
- `report`: writes report-<job id>.json into $PREFORK_EXAMPLES_DIR (default
  ./prefork-reports). The file is named by the job, never by its payload, and
  replaced atomically, so a job that runs twice leaves one whole file. Its
  result is the file's path (`prefork-queue show ID` prints it).
"""
import json
import os
import time
from datetime import datetime, timezone
from typing import Any

import prefork
from prefork import Job

LONGEST_SLEEP = 600.0
REPORTS_DIR_VARIABLE = "PREFORK_EXAMPLES_DIR"
DEFAULT_REPORTS_DIR = "prefork-reports"


class PlannedFailure(Exception):
    """The transient failure fail-n-times raises on purpose (retried with backoff)."""


def _number(payload: dict[str, Any], name: str, default: float) -> float:
    value = payload.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        # Retrying cannot fix the payload.
        raise prefork.PermanentError(f"{name} must be a number, not negative")
    return value


@prefork.handler("sleep")
def sleep(job: Job) -> None:
    time.sleep(min(float(_number(job.payload, "seconds", 1)), LONGEST_SLEEP))


@prefork.handler("fail-n-times")
def fail_n_times(job: Job) -> None:
    # The attempt number survives across workers and restarts (it is in the
    # database), so no other state is needed to count the failures.
    if job.attempt <= _number(job.payload, "times", 1):
        raise PlannedFailure(f"planned failure {job.attempt}")


@prefork.handler("report")
def report(job: Job) -> dict[str, str]:
    folder = os.environ.get(REPORTS_DIR_VARIABLE) or DEFAULT_REPORTS_DIR
    os.makedirs(folder, exist_ok=True)
    content = {"job_id": job.id, "title": str(job.payload.get("title", "report"))[:200],
               "attempt": job.attempt,
               "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    final_path = os.path.join(folder, f"report-{job.id}.json")
    partial_path = f"{final_path}.{os.getpid()}.partial"
    with open(partial_path, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
    os.replace(partial_path, final_path)
    return {"file": final_path}
