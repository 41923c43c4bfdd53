"""Every statement of the SQLite store's workflow pages (store/workflow_views.py), by
name: plain reads, each a range of the index INDEXED BY names (a statement fails
rather than run with another plan). Parameters are named, :name; times are
stored text (file.py); {ids}, {statuses} and {states} take queries.placeholders().

A workflow's columns are those workflow_views.workflow_row() reads; a member
job's, those a Jobs page lists and its step.
"""
from ..workflow_views import ViewSql
from .queries import placeholders

WORKFLOW = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows WHERE id = :id")

# A workflow's jobs in step order after a step, of some states: its members (steps 0
# and up), never a batch's callbacks (below 0).
MEMBER_JOBS = (
    "SELECT id, queue, job_type, status, priority, attempts, max_attempts, last_error,"
    " created_at, finished_at, cancel_requested_at, workflow_step"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_workflow"
    " WHERE workflow_id = :id AND workflow_step > :after AND status IN ({statuses})"
    " ORDER BY workflow_step LIMIT :limit")

# The workflows nested in one, in step order after a step, of some states.
MEMBER_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows INDEXED BY ix_prefork_workflows_parent"
    " WHERE parent_id = :id AND parent_step > :after AND state IN ({states})"
    " ORDER BY parent_step LIMIT :limit")

# A batch's callbacks: on_success (-1), then on_complete (-2).
CALLBACKS = (
    "SELECT id, queue, job_type, status, priority, attempts, max_attempts, last_error,"
    " created_at, finished_at, cancel_requested_at, workflow_step"
    " FROM prefork_jobs INDEXED BY ix_prefork_jobs_workflow"
    " WHERE workflow_id = :id AND workflow_step < 0 ORDER BY workflow_step DESC")

# Outermost workflows of every state, newest first, before an id: down the rowid.
ALL_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows NOT INDEXED"
    " WHERE root_id IS NULL AND id < :before ORDER BY id DESC LIMIT :limit")

# Outermost running (or waiting) workflows, newest first, before an id: their
# finished_at is NULL, so the root index's range is in id order.
PENDING_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows INDEXED BY ix_prefork_workflows_root"
    " WHERE root_id IS NULL AND state = :state AND finished_at IS NULL AND id < :before"
    " ORDER BY id DESC LIMIT :limit")

# Outermost ended workflows of a state, last ended first, after the one that ended
# at :at with the id :before: the root index's order.
ENDED_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows INDEXED BY ix_prefork_workflows_root"
    " WHERE root_id IS NULL AND state = :state"
    " AND (finished_at < :at OR (finished_at = :at AND id < :before))"
    " ORDER BY finished_at DESC, id DESC LIMIT :limit")

# The workflows nested directly in some ({ids}).
NESTED = ("SELECT id FROM prefork_workflows INDEXED BY ix_prefork_workflows_parent"
          " WHERE parent_id IN ({ids})")

# The ids of the jobs of some workflows ({ids}) in some states, from an id up.
JOB_IDS = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_workflow"
    " WHERE workflow_id IN ({ids}) AND status IN ({statuses}) AND id >= :after"
    " ORDER BY id LIMIT :limit")

SQL = ViewSql(workflow=WORKFLOW, member_jobs=MEMBER_JOBS, member_workflows=MEMBER_WORKFLOWS,
              callbacks=CALLBACKS, all_workflows=ALL_WORKFLOWS,
              pending_workflows=PENDING_WORKFLOWS, ended_workflows=ENDED_WORKFLOWS,
              nested=NESTED, job_ids=JOB_IDS, listed=placeholders)
