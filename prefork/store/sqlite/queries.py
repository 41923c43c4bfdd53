"""Every statement the SQLite store sends, by name. Nothing here is made by editing
another statement: each is written out in full, and the code asks for it by name.

Values are always bound parameters (:name). The one bounded composition is a
list of named placeholders for n values (placeholders()), filled into a
statement's {ids} or {queues} field. Times are this host's UTC clock as stored
text (see file.py): :now, and :lease_until, :available_at, :since or :before
computed from it. INDEXED BY makes a statement fail rather than run with
another plan than the one its index was made for.
"""
from collections.abc import Sequence
from typing import Any


def placeholders(prefix: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """(":prefix_0, :prefix_1, ...", {"prefix_0": value, ...}) for an IN (...) of values."""
    names = {f"{prefix}_{index}": value for index, value in enumerate(values)}
    return ", ".join(":" + name for name in names), names


# --- producing --------------------------------------------------------------------------

# Insert one job; a repeated (queue, key) inserts nothing (rowcount 0), and
# EXISTING_JOB then finds the job that holds the key. A job of a type with a
# published limit (prefork_limits) is limited: only the limited claim takes it.
ENQUEUE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at, concurrency_key, limited)"
    " VALUES (:queue, :job_type, :payload, :key, :priority, :max_attempts, :available_at,"
    " :now, :now, :concurrency_key,"
    " EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = :job_type))"
    " ON CONFLICT (queue, idempotency_key) DO NOTHING")

EXISTING_JOB = "SELECT id FROM prefork_jobs WHERE queue = :queue AND idempotency_key = :key"

# --- claims ------------------------------------------------------------------------------------

# The priorities of one queue's ready jobs without limits (:limited 0) or with
# them (1), one at a time: the lowest above :after, from one index entry. A
# paused queue has none to offer. The claim and the ready count read each
# priority's due jobs in turn (CLAIM_SELECT, READY_COUNT), so that a range of the
# claim index ends at its first job not yet due: delayed jobs are never read.
NEXT_PRIORITY = (
    "SELECT priority FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND limited = :limited AND priority > :after"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = :queue AND paused = 1)"
    " ORDER BY priority LIMIT 1")

# The next due ready jobs of one queue's :priority in index order, in the column
# order claimed_job() unpacks, then whether each is a workflow's member (its lease
# token is marked: jobs.MEMBER_TOKEN_MARK). No SKIP LOCKED: the claimer holds the database's
# write lock, so nobody else can reserve these rows meanwhile, nor pause the queue
# NEXT_PRIORITY found unpaused. Limited jobs are the limited claim's (limits.py):
# an equality of the claim index, so unlimited jobs never step over them.
CLAIM_SELECT = (
    "SELECT id, job_type, queue, payload, attempts, max_attempts, idempotency_key, crashes,"
    " workflow_step >= 0 FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND limited = 0 AND priority = :priority"
    " AND available_at <= :now ORDER BY available_at, id LIMIT :limit")

CLAIM_RESERVE = (
    "UPDATE prefork_jobs SET status = 'reserved', attempts = attempts + 1, lease_token = :token,"
    " lease_until = :lease_until, locked_by = :worker, process_id = :process_id,"
    " updated_at = :now WHERE id = :id")

# How many due jobs of one queue's :priority are ready, unlimited ones (:limited
# 0) or limited ones (1), counting at most :limit, from the claim index (a read:
# no lock taken; NEXT_PRIORITY checked the pause).
READY_COUNT = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND limited = :limited AND priority = :priority"
    " AND available_at <= :now LIMIT :limit)")

# --- one job under its lease ----------------------------------------------------------------
# The lease fence of complete and extend: our token, still reserved, lease
# not yet over. Zero rows matched means the lease was lost.
#
# A cancellation asked for while a job runs (cancel_requested_at) ends it on
# whichever path it leaves 'reserved' by: 'cancelled' (finished; last_error
# says what ended the attempt) instead of ready or dead, and the request
# cleared. A completion keeps 'done': the job finished before it could be stopped.

HOLDS_LEASE = ("SELECT 1 FROM prefork_jobs WHERE id = :id AND status = 'reserved'"
               " AND lease_token = :token AND lease_until > :now")

# The token stays on a done row: it tells whoever completes a group of jobs
# that one of them was already written with that same lease (by the parent,
# for a child busy with a slow job).
COMPLETE = (
    "UPDATE prefork_jobs SET status = 'done', lease_until = NULL, finished_at = :now,"
    " cancel_requested_at = NULL, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token AND lease_until > :now")

DONE_WITH_TOKEN = ("SELECT 1 FROM prefork_jobs WHERE id = :id AND status = 'done'"
                   " AND lease_token = :token")

# A failed attempt: the fence, reading the job's error history (the write lock
# is held from here to FAIL, which appends the attempt computed in Python).
FAILING_HISTORY = ("SELECT error_history FROM prefork_jobs WHERE id = :id"
                   " AND status = 'reserved' AND lease_token = :token AND lease_until > :now")

FAIL = (
    "UPDATE prefork_jobs"
    " SET status = CASE WHEN cancel_requested_at IS NULL THEN :status ELSE 'cancelled' END,"
    " last_error = :error, error_history = :history, lease_token = NULL, lease_until = NULL,"
    " available_at = :available_at,"
    " finished_at = CASE WHEN :status = 'dead' OR cancel_requested_at IS NOT NULL THEN :now END,"
    " cancel_requested_at = NULL, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token AND lease_until > :now")

# Release needs no live lease: giving back an unstarted claim is always
# safe while the token still matches (nobody else took the job).
RELEASE = (
    "UPDATE prefork_jobs"
    " SET status = CASE WHEN cancel_requested_at IS NULL THEN 'ready' ELSE 'cancelled' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN :now END,"
    " attempts = attempts - 1, lease_token = NULL, lease_until = NULL, locked_by = NULL,"
    " cancel_requested_at = NULL, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token")

EXTEND = (
    "UPDATE prefork_jobs SET lease_until = :lease_until, updated_at = :now"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token AND lease_until > :now")

# The dead worker's job, by its token (no lease check: the token proves
# nobody else took it), and whether its cancellation was asked for.
HELD_BY_TOKEN = ("SELECT attempts, max_attempts, crashes, error_history,"
                 " cancel_requested_at IS NOT NULL FROM prefork_jobs"
                 " WHERE id = :id AND status = 'reserved' AND lease_token = :token")

# :status is ready, dead or (asked for) cancelled, decided from HELD_BY_TOKEN's row.
HAND_BACK = (
    "UPDATE prefork_jobs SET status = :status, attempts = attempts - :restored,"
    " crashes = crashes + :crashed, last_error = :error, error_history = :history,"
    " lease_token = NULL, lease_until = NULL, available_at = :available_at,"
    " finished_at = CASE WHEN :status IN ('dead', 'cancelled') THEN :now END,"
    " cancel_requested_at = NULL, updated_at = :now WHERE id = :id")

# Up to :limit expired leases, oldest first through the lease index: (id, whether
# it is a workflow's member: its end, if it ends, moves its workflow on).
EXPIRED = (
    "SELECT id, workflow_step >= 0 FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " WHERE status = 'reserved' AND lease_until <= :now ORDER BY lease_until LIMIT :limit")

# Those ({ids}) back to ready (dead when out of attempts).
RECOVER_EXPIRED = (
    "UPDATE prefork_jobs"
    " SET status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'"
    " WHEN attempts >= max_attempts THEN 'dead' ELSE 'ready' END,"
    " last_error = 'lease expired', lease_token = NULL, lease_until = NULL,"
    " available_at = :now, updated_at = :now,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL OR attempts >= max_attempts"
    " THEN :now END, cancel_requested_at = NULL"
    " WHERE id IN ({ids}) AND status = 'reserved' AND lease_until <= :now")

# --- inspection and repair ------------------------------------------------------------------
# An optional :queue is NULL (all queues) or a queue's name.

GET = (
    "SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts,"
    " max_attempts, crashes, available_at, lease_until, locked_by, last_error, error_history,"
    " created_at, updated_at, finished_at, concurrency_key, limited, cancel_requested_at"
    " FROM prefork_jobs WHERE id = :id")

DEAD_JOBS = (
    "SELECT id, queue, job_type, attempts, last_error, finished_at FROM prefork_jobs"
    " WHERE status = 'dead' AND (:queue IS NULL OR queue = :queue)"
    " ORDER BY finished_at DESC, id DESC LIMIT :limit")

# :max_attempts: the jobs' new max_attempts, or NULL to keep each one's.
# {statuses}: the finished states retried (dead, cancelled). A job is limited
# as its type is now (it may have got or lost a limit since it ended). Not a
# workflow's members: their retry carries their workflow's bookkeeping
# (workflow_queries.RETRY_MEMBER).
RETRY_DEAD = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = :now,"
    " limited = EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = prefork_jobs.job_type),"
    " max_attempts = COALESCE(:max_attempts, max_attempts), updated_at = :now"
    " WHERE status IN ({statuses}) AND (:queue IS NULL OR queue = :queue)"
    " AND COALESCE(workflow_step, -1) < 0")

RETRY_DEAD_IDS = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = :now,"
    " limited = EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = prefork_jobs.job_type),"
    " max_attempts = COALESCE(:max_attempts, max_attempts), updated_at = :now"
    " WHERE status IN ({statuses}) AND (:queue IS NULL OR queue = :queue) AND id IN ({ids})"
    " AND COALESCE(workflow_step, -1) < 0")

COUNTS = "SELECT status, COUNT(*) FROM prefork_jobs GROUP BY status"

# Depth of some queues ({queues}) for the metrics: only the claim index's ranges
# of every status but done (its first column), so the millions of done rows are
# never read.
QUEUE_STATS = (
    "SELECT queue, status, COUNT(*), SUM(available_at <= :now),"
    " (julianday(:now) - julianday(MIN(CASE WHEN available_at <= :now THEN available_at END)))"
    " * 86400.0"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('ready', 'reserved', 'dead', 'cancelled') AND queue IN ({queues})"
    " GROUP BY queue, status")

# A job held by a worker whose host name is not ours: the file is shared
# beyond this machine (locked_by is "host:pid").
FOREIGN_HOLDER = (
    "SELECT locked_by FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " WHERE status = 'reserved' AND substr(locked_by, 1, length(:prefix)) <> :prefix LIMIT 1")

# --- the supervisor registry ------------------------------------------------------------------

REGISTER = (
    "INSERT INTO prefork_processes (host, pid, state, queues, workers, version, started_at,"
    " heartbeat_at) VALUES (:host, :pid, 'running', :queues, :workers, :version, :now, :now)")

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

# The reserved jobs of a vanished supervisor: who claimed each (host:pid), when
# its claim or last extension was written, and whether it is a workflow's member.
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

# --- control, status and pruning -----------------------------------------------------------------

# The newest restart request for this host, and the paused queues (the clock
# is this host's: no server to ask).
CONTROL = (
    "SELECT (SELECT MAX(requested_at) FROM prefork_restarts WHERE host IN ('*', :host)),"
    " (SELECT group_concat(queue, ',') FROM prefork_queue_states WHERE paused = 1)")

REQUEST_RESTART = (
    "INSERT INTO prefork_restarts (host, requested_at) VALUES (:host, :at)"
    " ON CONFLICT (host) DO UPDATE SET requested_at = excluded.requested_at")

SET_PAUSED = (
    "INSERT INTO prefork_queue_states (queue, paused, updated_at) VALUES (:queue, :paused, :now)"
    " ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at")

RUNNING_PROCESSES = (
    "SELECT id, host, pid, queues, workers, version, children, started_at, heartbeat_at"
    " FROM prefork_processes WHERE state = 'running' ORDER BY host, pid")

PAUSED_QUEUES = "SELECT queue FROM prefork_queue_states WHERE paused = 1 ORDER BY queue"

# Per queue, every status but done (the claim index starts with status, so
# the millions of done rows are never read), split into due and delayed.
LIVE_COUNTS = (
    "SELECT queue, status, available_at <= :now AS due, COUNT(*), MIN(available_at)"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status IN ('ready', 'reserved', 'dead', 'cancelled') GROUP BY queue, status, due")

DONE_SINCE = (
    "SELECT queue, COUNT(*) FROM prefork_jobs INDEXED BY ix_prefork_jobs_finished"
    " WHERE status = 'done' AND finished_at >= :since GROUP BY queue")

COUNT_FINISHED = "SELECT COUNT(*) FROM prefork_jobs WHERE status = :status AND finished_at < :before"

# Oldest first through the finished index, a bounded batch per statement.
PRUNE_FINISHED = (
    "DELETE FROM prefork_jobs WHERE id IN (SELECT id FROM prefork_jobs"
    " INDEXED BY ix_prefork_jobs_finished WHERE status = :status AND finished_at < :before"
    " ORDER BY finished_at LIMIT :batch)")

PRUNE_PROCESSES = (
    "DELETE FROM prefork_processes WHERE id IN (SELECT id FROM prefork_processes"
    " WHERE state IN ('stopped', 'pruned') AND heartbeat_at < :before LIMIT :batch)")

DISCARD_DEAD = "DELETE FROM prefork_jobs WHERE status = 'dead' AND id IN ({ids})"

# --- schema and connection ----------------------------------------------------------------------

HAS_MIGRATIONS_TABLE = ("SELECT 1 FROM sqlite_master"
                        " WHERE type = 'table' AND name = 'prefork_schema_migrations'")

SCHEMA_VERSIONS = "SELECT version FROM prefork_schema_migrations"

CREATE_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS prefork_schema_migrations ("
    " version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")

RECORD_MIGRATION = ("INSERT INTO prefork_schema_migrations (version, name, applied_at)"
                    " VALUES (:version, :name, :now)")

BEGIN_WRITE = "BEGIN IMMEDIATE"   # takes the write lock before the first read
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

WAL_JOURNAL = "PRAGMA journal_mode = WAL"   # answers the mode now in force
# FULL: a commit the caller was told about survives a power cut (in WAL mode,
# NORMAL may lose the last transactions).
DURABLE_COMMITS = "PRAGMA synchronous = FULL"
DATABASE_FILE = "PRAGMA database_list"   # (seq, name, file) of each attached database

# --- after a reconnection: jobs reserved in a supervisor's name that none of its workers holds

# Those of JOBS_OF's ({ids}) given back uncharged, as RELEASE gives back a claim.
RETURN_STRAYS = (
    "UPDATE prefork_jobs"
    " SET status = CASE WHEN cancel_requested_at IS NULL THEN 'ready' ELSE 'cancelled' END,"
    " finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN :now END,"
    " attempts = attempts - 1, lease_token = NULL, lease_until = NULL, locked_by = NULL,"
    " cancel_requested_at = NULL, updated_at = :now"
    " WHERE id IN ({ids}) AND status = 'reserved' AND process_id = :id")
