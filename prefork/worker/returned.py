"""What a handler returned: the result its job keeps, written with its completion
(prefork/results.py). A completion with a result is written by the worker that ran
the job, at once: it is never left to the parent nor to a batch's last job, so a
done job never lacks its result."""
import logging
from typing import Any

from ..jobs import Job, JobRun, utc_now
from ..logs import event
from ..results import KeptResult, kept


def run_of(worker: str, config: Any) -> JobRun:
    """The run of an attempt `worker` starts now, under these settings."""
    return JobRun(worker, utc_now(), config.result_ttl, config.max_result_bytes)


def results_to_keep(job: Job, returned: Any) -> list[KeptResult]:
    """What to write with the job's completion (one result or none): what the handler
    returned, else what it set as job.result (ResultRefused when it cannot be kept).
    None once its own job.transaction() committed: what it set inside was written then."""
    if not job.finished:
        if returned is not None:
            job.result = returned
        result = kept(job)
        return [result] if result else []
    if returned is not None and returned is not job.result:
        # Returned after its transaction committed: too late to keep it.
        event("job_result_not_kept", level=logging.WARNING, job_id=job.id, type=job.type)
    return []
