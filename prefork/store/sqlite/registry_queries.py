"""The SQLite store's statements of the supervisor registry (prefork_processes), by
name (as store/mysql/registry_queries.py): a supervisor's row (register, publish,
heartbeat, stop), the pruning of the silent ones with the jobs their children
held, and the reads of the running ones. Values are bound by name; {ids} takes
queries.placeholders()."""

REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, job_types,"
    " heartbeat_interval, started_at, heartbeat_at) VALUES (:host, :pid, 'running', :queues,"
    " :workers, :version, :job_types, :heartbeat_interval, :now, :now)")

# After a reload: the job types and heartbeat interval now in force (a running row only).
PUBLISH = ("UPDATE prefork_processes SET job_types = :job_types,"
           " heartbeat_interval = :heartbeat_interval WHERE id = :id AND state = 'running'")

# Only a running row beats: one that others pruned stays pruned, and its
# supervisor learns it from the row count.
HEARTBEAT = (
    "UPDATE prefork_processes SET heartbeat_at = :now, queues = :queues, workers = :workers,"
    " children = :children WHERE id = :id AND state = 'running'")

STOP = ("UPDATE prefork_processes SET state = 'stopped', children = NULL, heartbeat_at = :now"
        " WHERE id = :id AND state = 'running'")

SILENT = ("SELECT id FROM prefork_processes WHERE state = 'running' AND heartbeat_at < :since"
          " ORDER BY heartbeat_at LIMIT :limit")

MARK_PRUNED = ("UPDATE prefork_processes SET state = 'pruned', children = NULL"
               " WHERE id = :id AND state = 'running' AND heartbeat_at < :since")

# The reserved jobs of a vanished supervisor: who claimed each (host:pid) and
# when its claim or last extension was written, and whether a workflow's member.
JOBS_OF = ("SELECT id, locked_by, updated_at, workflow_step >= 0"
           " FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
           " WHERE status = 'reserved' AND process_id = :id")

# Those of them ({ids}) whose holder is gone, as lease expiry would return them
# (the attempt was used), but now instead of when each lease runs out.
RETURN_JOBS_OF = (
    "UPDATE prefork_jobs"
    " SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    " WHEN attempts >= max_attempts THEN 'dead' ELSE 'ready' END,"
    " last_error = :error, lease_token = NULL, lease_until = NULL, available_at = :now,"
    " updated_at = :now,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts"
    " THEN :now END, cancel_requested_at = NULL"
    " WHERE id IN ({ids}) AND status = 'reserved' AND process_id = :id")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at,"
    " heartbeat_interval FROM prefork_processes WHERE state = 'running' ORDER BY host, pid")

# What `enqueue` checks a job's type against: each running supervisor's queues and
# job types, and its heartbeat (not its children: they may be long).
RUNNING_HANDLERS = ("SELECT queues, job_types, heartbeat_interval, heartbeat_at"
                    " FROM prefork_processes WHERE state = 'running'")
