"""The MySQL store's statements of the supervisor registry (prefork_processes), by
name, the same in both dialects: a supervisor's row (register, publish, heartbeat,
stop), the pruning of the silent ones with the jobs their children held, and the
reads of the running ones. Values are bound parameters (%s); {ids} takes
queries.placeholders()."""

# (host, pid, queues, workers, version, job types, heartbeat interval): the last two
# as registry_rows.Published holds them.
REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, job_types,"
    " heartbeat_interval, started_at, heartbeat_at) VALUES (%s, %s, 'running', %s, %s, %s,"
    " %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

# After a reload: the job types and heartbeat interval now in force (a running row only).
PUBLISH = ("UPDATE prefork_processes SET job_types = %s, heartbeat_interval = %s"
           " WHERE id = %s AND state = 'running'")

# Only a running row beats: one that others pruned stays pruned, and its
# supervisor learns it from the row count.
HEARTBEAT = (
    "UPDATE prefork_processes SET heartbeat_at = UTC_TIMESTAMP(6), queues = %s, workers = %s,"
    " children = %s WHERE id = %s AND state = 'running'")

STOP = ("UPDATE prefork_processes SET state = 'stopped', children = NULL,"
        " heartbeat_at = UTC_TIMESTAMP(6) WHERE id = %s AND state = 'running'")

SILENT = ("SELECT id FROM prefork_processes WHERE state = 'running'"
          " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND"
          " ORDER BY heartbeat_at LIMIT %s")

# Whoever flips the row to 'pruned' hands back its jobs; the others see 0 rows.
MARK_PRUNED = ("UPDATE prefork_processes SET state = 'pruned', children = NULL"
               " WHERE id = %s AND state = 'running'"
               " AND heartbeat_at < UTC_TIMESTAMP(6) - INTERVAL %s MICROSECOND")

# The reserved jobs of a vanished supervisor: who claimed each (host:pid) and
# how long ago its claim or last extension was written, by the server's clock, and
# whether it is a workflow's member.
# No locking read: RETURN_JOBS_OF checks again what it returns.
JOBS_OF = (
    "SELECT id, locked_by, TIMESTAMPDIFF(MICROSECOND, updated_at, UTC_TIMESTAMP(6)),"
    " workflow_step >= 0 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
    " WHERE status = 'reserved' AND process_id = %s")

# Those of them ({ids}) whose holder is gone, as lease expiry would return them
# (the attempt was used; cancelled when that is pending), but now instead of when
# each lease runs out.
RETURN_JOBS_OF = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(cancel_requested_at IS NOT NULL, 'cancelled',"
    " IF(attempts >= max_attempts, 'dead', 'ready')), last_error = %s,"
    " lease_token = NULL, lease_until = NULL, available_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(cancel_requested_at IS NOT NULL OR attempts >= max_attempts,"
    " UTC_TIMESTAMP(6), NULL), cancel_requested_at = NULL,"
    " updated_at = UTC_TIMESTAMP(6) WHERE id IN ({ids}) AND status = 'reserved'"
    " AND process_id = %s")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at,"
    " heartbeat_interval,"
    " TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) / 1e6 AS heartbeat_age_s"
    " FROM prefork_processes FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running' ORDER BY host, pid")

# What `enqueue` checks a job's type against: each running supervisor's queues and
# job types, and what tells whether it is stale (not its children: they may be long).
RUNNING_HANDLERS = (
    "SELECT queues, job_types, heartbeat_interval,"
    " TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) / 1e6 AS heartbeat_age_s"
    " FROM prefork_processes FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running'")
