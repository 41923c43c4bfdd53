"""Every statement of the SQLite store's workflows (workflows.py), by name, under the
rules of queries.py: bound parameters (:name), times as stored text (:now), {ids} a
list of named placeholders (queries.placeholders). SQLite serialises writers, so a
workflow row read in a write transaction is the row that transaction writes back:
no locking read is needed. :stopped is model.STOPPED_ERROR.

The statements that store/flows.py runs for both backends are gathered in SQL at
the end, the MySQL store's under the same parameter names.
"""
from ..flows import FlowSql
from .queries import placeholders

# --- producing ------------------------------------------------------------------------

# A workflow row; an outermost workflow's key already taken inserts nothing
# (row count 0), and WORKFLOW_BY_KEY finds it.
INSERT_WORKFLOW = (
    "INSERT INTO prefork_workflows (root_id, parent_id, parent_step, kind, state, policy,"
    " on_dead, is_open, total, idempotency_key, created_at, updated_at)"
    " VALUES (:root_id, :parent_id, :parent_step, :kind, :state, :policy, :on_dead, :is_open,"
    " :total, :key, :now, :now) ON CONFLICT (idempotency_key) DO NOTHING")

WORKFLOW_BY_KEY = "SELECT id FROM prefork_workflows WHERE idempotency_key = :key"

# One job of a workflow, due now (a waiting job's available_at is set again when
# it is released); limited as queries.ENQUEUE reads it. No key: no conflict.
INSERT_MEMBER = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, priority, max_attempts, available_at,"
    " created_at, updated_at, concurrency_key, limited, status, workflow_id, workflow_step)"
    " VALUES (:queue, :job_type, :payload, :priority, :max_attempts, :now, :now, :now,"
    " :concurrency_key, EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = :job_type),"
    " :status, :workflow_id, :step)")

# Every job of an outermost workflow and its nested ones, in id order.
JOBS_OF_ROOT = (
    "SELECT j.id FROM prefork_workflows AS w"
    " JOIN prefork_jobs AS j INDEXED BY ix_prefork_jobs_workflow ON j.workflow_id = w.id"
    " WHERE w.id = :id OR w.root_id = :id ORDER BY j.id")

# --- the bookkeeping (workflows.SQLiteBooks) ---------------------------------------------

# One workflow row, in the column order of model.Node.
WORKFLOW_ROW = (
    "SELECT id, parent_id, parent_step, kind, state, policy, on_dead, is_open, current_step,"
    " total, done, dead, cancelled FROM prefork_workflows WHERE id = :id")

SAVE_WORKFLOW = (
    "UPDATE prefork_workflows SET state = :state, is_open = :is_open,"
    " current_step = :current_step, total = :total, done = :done, dead = :dead,"
    " cancelled = :cancelled, updated_at = :now,"
    " finished_at = CASE WHEN :state IN ('done', 'dead', 'cancelled')"
    " THEN COALESCE(finished_at, :now) END WHERE id = :id")

# Release the waiting job at one step: due now, limited as its type is now.
RELEASE_STEP = (
    "UPDATE prefork_jobs SET status = 'ready', available_at = :now, updated_at = :now,"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE workflow_id = :id AND workflow_step = :step AND status = 'waiting'")

# Release every waiting member of a group: steps 0 and up.
RELEASE_MEMBERS = (
    "UPDATE prefork_jobs SET status = 'ready', available_at = :now, updated_at = :now,"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE workflow_id = :id AND workflow_step >= 0 AND status = 'waiting'")

STEP_STATUS = "SELECT status FROM prefork_jobs WHERE workflow_id = :id AND workflow_step = :step"

CHILD_AT = "SELECT id FROM prefork_workflows WHERE parent_id = :id AND parent_step = :step"

CHILDREN_AFTER = ("SELECT id FROM prefork_workflows WHERE parent_id = :id AND parent_step > :step"
                  " ORDER BY parent_step")

CANCEL_WAITING = (
    "UPDATE prefork_jobs SET status = 'cancelled', last_error = :stopped, finished_at = :now,"
    " updated_at = :now WHERE workflow_id = :id AND workflow_step > :step AND status = 'waiting'")

RESTORE_STOPPED = (
    "UPDATE prefork_jobs SET status = 'waiting', last_error = NULL, finished_at = NULL,"
    " updated_at = :now WHERE workflow_id = :id AND workflow_step > :step"
    " AND status = 'cancelled' AND last_error = :stopped")

# --- a member's end, on the paths that end jobs ----------------------------------------------

# Where members are ({ids}): (id, workflow id, step).
PLACES = ("SELECT id, workflow_id, workflow_step FROM prefork_jobs"
          " WHERE id IN ({ids}) AND workflow_step >= 0")

# A member's lease (:id, :token) before its completion: live and ours (then
# workflow id, step), or done under it already (its completion was written).
MEMBER_LEASE = (
    "SELECT status, workflow_id, workflow_step FROM prefork_jobs WHERE id = :id"
    " AND lease_token = :token AND (status = 'done'"
    " OR (status = 'reserved' AND lease_until > :now))")

# A member's claim given back (:id, :token): whether its cancellation is pending.
MEMBER_RELEASING = (
    "SELECT cancel_requested_at IS NOT NULL, workflow_id, workflow_step FROM prefork_jobs"
    " WHERE id = :id AND status = 'reserved' AND lease_token = :token")

# The jobs lease expiry returns (:limit, oldest first): (id, whether a member).
EXPIRED = (
    "SELECT id, workflow_step >= 0 FROM prefork_jobs INDEXED BY ix_prefork_jobs_lease"
    " WHERE status = 'reserved' AND lease_until <= :now ORDER BY lease_until LIMIT :limit")

# Their state once a statement returned them ({ids}): (id, status).
STATES_OF = "SELECT id, status FROM prefork_jobs WHERE id IN ({ids})"

# --- a retry -------------------------------------------------------------------------------------

# Members to retry ({statuses}, maybe {ids}; :queue or NULL), from :after on.
MEMBERS_TO_RETRY = (
    "SELECT id, status, workflow_id, workflow_step FROM prefork_jobs"
    " WHERE status IN ({statuses}) AND (:queue IS NULL OR queue = :queue) AND workflow_step >= 0"
    " AND id >= :after ORDER BY id LIMIT :batch")

MEMBER_IDS_TO_RETRY = (
    "SELECT id, status, workflow_id, workflow_step FROM prefork_jobs"
    " WHERE status IN ({statuses}) AND (:queue IS NULL OR queue = :queue) AND workflow_step >= 0"
    " AND id IN ({ids}) ORDER BY id")

# One retried member (:status ready or waiting), as queries.RETRY_DEAD_IDS retries a job.
RETRY_MEMBER = (
    "UPDATE prefork_jobs SET status = :status, attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = :now,"
    " limited = EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = prefork_jobs.job_type),"
    " max_attempts = COALESCE(:max_attempts, max_attempts), updated_at = :now WHERE id = :id")

# --- reading ------------------------------------------------------------------------------------

PROGRESS = ("SELECT id, kind, state, total, done, dead, cancelled, is_open"
            " FROM prefork_workflows WHERE id = :id")

PLACE_OF = (
    "SELECT w.id, w.kind, j.workflow_step, COALESCE(w.root_id, w.id)"
    " FROM prefork_jobs AS j JOIN prefork_workflows AS w ON w.id = j.workflow_id"
    " WHERE j.id = :id")


SQL = FlowSql(
    insert_workflow=INSERT_WORKFLOW, workflow_by_key=WORKFLOW_BY_KEY, jobs_of_root=JOBS_OF_ROOT,
    workflow_row=WORKFLOW_ROW, save_workflow=SAVE_WORKFLOW, release_step=RELEASE_STEP,
    release_members=RELEASE_MEMBERS, step_status=STEP_STATUS, child_at=CHILD_AT,
    children_after=CHILDREN_AFTER, cancel_waiting=CANCEL_WAITING,
    restore_stopped=RESTORE_STOPPED, places=PLACES, states_of=STATES_OF,
    members_to_retry=MEMBERS_TO_RETRY, member_ids_to_retry=MEMBER_IDS_TO_RETRY,
    retry_member=RETRY_MEMBER, progress=PROGRESS, place_of=PLACE_OF, listed=placeholders)
