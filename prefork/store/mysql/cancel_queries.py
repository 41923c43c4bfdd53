"""Every statement of the MySQL store's cancellation (cancel.py), by name, under the
rules of queries.py; the paths that end a running job cancelled once its holder
lets go of it (fail, hand-back, release, lease expiry, a silent supervisor's
return) are in queries.py and failure_queries.py. Both dialects send these as
they are (plain locking reads and single-table UPDATEs by primary key), and so
can any MySQL driver an application's transaction runs on (cancel_on()).

Values are bound parameters (%s); {ids} takes queries.placeholders().
"""

# The state of each job asked for ({ids}), and whether it is a workflow's member,
# locked in id order for the rest of the cancelling transaction.
LOCK_STATES = (
    "SELECT id, status, workflow_step >= 0 FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id IN ({ids}) FOR UPDATE")

# Ready ones (delayed ones too) and waiting ones (a workflow's, not released yet):
# cancelled now, never run; last_error says so, as for a running one stopped by
# its supervisor (FINISH_CANCELLED).
CANCEL_READY = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'cancelled', last_error = 'cancelled',"
    " lease_token = NULL, lease_until = NULL, finished_at = UTC_TIMESTAMP(6),"
    " updated_at = UTC_TIMESTAMP(6) WHERE id IN ({ids}) AND status IN ('ready', 'waiting')")

# Running ones: their supervisor stops them (cancel_requested() tells it). The
# first request's time stays. updated_at is left alone: it says when the holder
# last wrote its job (prune_silent()'s JOBS_OF), which a cancel is not.
REQUEST_CANCEL = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET cancel_requested_at = UTC_TIMESTAMP(6)"
    " WHERE id IN ({ids}) AND status = 'reserved' AND cancel_requested_at IS NULL")

# cancel_matching(): the next ids of one state of a queue (maybe of one type
# too), or of a type in every queue, in id order after an id (keyset batches):
# a range of the index named, in id order.
# (status, queue, type or NULL, type again, after id, batch)
MATCHING_IN_QUEUE = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_queue)"
    " WHERE status = %s AND queue = %s AND (%s IS NULL OR job_type = %s) AND id > %s"
    " ORDER BY id LIMIT %s")

# (status, type, after id, batch)
MATCHING_OF_TYPE = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_status_type)"
    " WHERE status = %s AND job_type = %s AND id > %s ORDER BY id LIMIT %s")

# A supervisor's running jobs whose cancellation is pending, through the cancel
# index: an empty range whenever no cancel is.
CANCEL_REQUESTED = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_cancel)"
    " WHERE cancel_requested_at IS NOT NULL AND status = 'reserved' AND process_id = %s")

# End a reserved job cancelled (id, token): its worker stopped on JobCancelled,
# or its supervisor killed the worker. Fenced by the token only, as RELEASE is.
FINISH_CANCELLED = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'cancelled', last_error = 'cancelled',"
    " lease_token = NULL, lease_until = NULL, finished_at = UTC_TIMESTAMP(6),"
    " cancel_requested_at = NULL, updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s")
