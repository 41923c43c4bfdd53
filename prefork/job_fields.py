"""A job given as JSON fields (a line of `enqueue --file`, the body of the dashboard's
POST /api/enqueue) checked into a NewJob, and job types checked against the
configured handlers: what every producer's input passes before it is inserted."""
from collections.abc import Iterable
from typing import Any

from . import registry
from .config import Config
from .errors import UserError
from .jobs import NewJob, new_job

JOB_FIELDS = ("type", "payload", "queue", "key", "delay", "priority", "max_attempts",
              "concurrency_key")


def job_from_fields(fields: Any, config: Config) -> NewJob:
    """The NewJob of {"type": ..., "payload": {...}, "queue", "key", "delay", "priority",
    "max_attempts", "concurrency_key"}; a one-line UserError for anything else."""
    if not isinstance(fields, dict) or "type" not in fields:
        raise UserError("a job must be a JSON object with a \"type\"")
    unknown = sorted(set(fields) - set(JOB_FIELDS))
    if unknown:
        raise UserError(f"unknown field {unknown[0]!r}")
    return new_job(fields["type"], fields.get("payload", {}),
                   queue=fields.get("queue", "default"), key=fields.get("key"),
                   delay=fields.get("delay", 0), priority=fields.get("priority", 0),
                   max_attempts=fields.get("max_attempts", config.max_attempts),
                   max_payload_bytes=config.max_payload_bytes,
                   concurrency_key=fields.get("concurrency_key"))


def check_job_types(job_types: Iterable[str], config: Config) -> None:
    """With `app` configured, refuse a job type no handler is registered for."""
    if not config.app:
        return
    registry.import_apps(config.app)
    for job_type in sorted(job_types):
        if registry.lookup(job_type) is None and job_type not in config.named("command"):
            raise UserError(f"unknown job type {job_type!r}: no handler in {','.join(config.app)}")
