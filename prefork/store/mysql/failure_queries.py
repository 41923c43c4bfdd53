"""The MySQL store's statements of the failure path, by name (the rest are in
queries.py, under the same rules): a failed attempt and a dead worker's job
hand-back. Each locks its row, reading the job's error history and the server's
clock, so that the store can append the attempt in Python and write it back in
the same transaction: no JSON function of one server only, and nothing added to
the claims and completions. Each also reads whether the job's cancellation is
pending: then it ends cancelled, whatever the failure would have decided.
"""

# A failed attempt's fence (id, token): our token, still reserved, lease not yet
# over; zero rows means the lease was lost. The row stays locked for FAIL.
LOCK_FAILING = (
    "SELECT error_history, UTC_TIMESTAMP(6), cancel_requested_at IS NOT NULL"
    " FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s"
    " AND lease_until > UTC_TIMESTAMP(6) FOR UPDATE")

# (status, error, history, delay in microseconds, status again, the attempts the
# job gets under its type's rules or NULL, id, token), on the row LOCK_FAILING
# holds. A job that leaves `reserved` has no cancellation pending. Fenced again by
# the state it expects: on a cluster with writers on several nodes (Galera) the
# lock is only this node's.
FAIL = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = %s, last_error = %s,"
    " error_history = %s, lease_token = NULL, lease_until = NULL,"
    " available_at = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " finished_at = IF(%s = 'ready', NULL, UTC_TIMESTAMP(6)), cancel_requested_at = NULL,"
    " max_attempts = COALESCE(%s, max_attempts), updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s")

# The dead worker's job, locked by its token (no lease check: the token
# proves nobody else took it).
LOCK_HELD = (
    "SELECT attempts, max_attempts, crashes, error_history, UTC_TIMESTAMP(6),"
    " cancel_requested_at IS NOT NULL FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s FOR UPDATE")

# (status, attempt restored 0/1, crash 0/1, error, history, delay in
# microseconds, status, id, token), on the row LOCK_HELD holds; fenced like FAIL.
HAND_BACK = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = %s, attempts = attempts - %s,"
    " crashes = crashes + %s, last_error = %s, error_history = %s, lease_token = NULL,"
    " lease_until = NULL, available_at = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " finished_at = IF(%s = 'ready', NULL, UTC_TIMESTAMP(6)), cancel_requested_at = NULL,"
    " updated_at = UTC_TIMESTAMP(6) WHERE id = %s AND status = 'reserved' AND lease_token = %s")
