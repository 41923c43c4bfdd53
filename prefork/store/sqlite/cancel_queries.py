"""Every statement of the SQLite store's cancellation (cancel.py), by name; the
paths that end a running job cancelled once its holder lets go of it (fail,
release, hand-back, lease expiry, a silent supervisor's return) are queries.py's.
Values are bound parameters (:name); {ids} is a list of named placeholders
(queries.placeholders). Times are stored text (file.py).
"""

# The state of each job asked for ({ids}), and whether it is a workflow's member,
# read inside the cancelling transaction.
CANCEL_STATES = "SELECT id, status, workflow_step >= 0 FROM prefork_jobs WHERE id IN ({ids})"

# Ready ones (delayed ones too) and waiting ones (a workflow's, not released yet):
# cancelled now, never run.
CANCEL_READY = (
    "UPDATE prefork_jobs SET status = 'cancelled', last_error = 'cancelled', lease_token = NULL,"
    " lease_until = NULL, finished_at = :now, updated_at = :now"
    " WHERE id IN ({ids}) AND status IN ('ready', 'waiting')")

# Running ones: their supervisor stops them (cancel_requested() tells it). The
# first request's time stays. updated_at is left alone: it says when the
# holder last wrote (prune_silent()'s JOBS_OF), which a cancel is not.
REQUEST_CANCEL = (
    "UPDATE prefork_jobs SET cancel_requested_at = :now"
    " WHERE id IN ({ids}) AND status = 'reserved' AND cancel_requested_at IS NULL")

# cancel_matching(): the next ids of one state of a queue (and maybe a type),
# or of a type in every queue, in id order from :after on (keyset batches).
MATCHING_IN_QUEUE = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_status_queue"
    " WHERE status = :status AND queue = :queue AND (:job_type IS NULL OR job_type = :job_type)"
    " AND id > :after ORDER BY id LIMIT :batch")

MATCHING_OF_TYPE = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_status_type"
    " WHERE status = :status AND job_type = :job_type AND id > :after ORDER BY id LIMIT :batch")

# A supervisor's running jobs whose cancellation is pending, through the cancel
# index: an empty range whenever no cancel is.
CANCEL_REQUESTED = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_cancel"
    " WHERE cancel_requested_at IS NOT NULL AND status = 'reserved'"
    " AND process_id = :process_id")

# A running job stopped by its cancellation (its worker raised JobCancelled in
# it, or its supervisor killed the worker): fenced by the token alone, as
# release is.
FINISH_CANCELLED = (
    "UPDATE prefork_jobs SET status = 'cancelled', last_error = 'cancelled', lease_token = NULL,"
    " lease_until = NULL, finished_at = :now, cancel_requested_at = NULL, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token")
