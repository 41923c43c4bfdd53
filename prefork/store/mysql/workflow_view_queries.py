"""Every statement of the MySQL store's workflow pages (store/workflow_views.py), by
name, under the rules of queries.py: plain reads, the same in both dialects, each
a range of the index it names. Parameters are named, %(name)s; {ids}, {statuses}
and {states} take workflow_queries.named_list().

A workflow's columns are those workflow_views.workflow_row() reads; a member
job's, those a Jobs page lists and its step.
"""
from ..workflow_views import ViewSql
from .workflow_queries import named_list

WORKFLOW = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows WHERE id = %(id)s")

# A workflow's jobs in step order after a step, of some states: its members (steps 0
# and up), never a batch's callbacks (below 0).
MEMBER_JOBS = (
    "SELECT id, queue, job_type, status, priority, attempts, max_attempts, last_error,"
    " created_at, finished_at, cancel_requested_at, workflow_step"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_workflow)"
    " WHERE workflow_id = %(id)s AND workflow_step > %(after)s AND status IN ({statuses})"
    " ORDER BY workflow_step LIMIT %(limit)s")

# The workflows nested in one, in step order after a step, of some states.
MEMBER_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows FORCE INDEX (ix_prefork_workflows_parent)"
    " WHERE parent_id = %(id)s AND parent_step > %(after)s AND state IN ({states})"
    " ORDER BY parent_step LIMIT %(limit)s")

# A batch's callbacks: on_success (-1), then on_complete (-2).
CALLBACKS = (
    "SELECT id, queue, job_type, status, priority, attempts, max_attempts, last_error,"
    " created_at, finished_at, cancel_requested_at, workflow_step"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_workflow)"
    " WHERE workflow_id = %(id)s AND workflow_step < 0 ORDER BY workflow_step DESC")

# Outermost workflows of every state, newest first, before an id.
ALL_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows FORCE INDEX (PRIMARY)"
    " WHERE root_id IS NULL AND id < %(before)s ORDER BY id DESC LIMIT %(limit)s")

# Outermost running (or waiting) workflows, newest first, before an id: their
# finished_at is NULL, so the root index's range is in id order.
PENDING_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows FORCE INDEX (ix_prefork_workflows_root)"
    " WHERE root_id IS NULL AND state = %(state)s AND finished_at IS NULL AND id < %(before)s"
    " ORDER BY id DESC LIMIT %(limit)s")

# Outermost ended workflows of a state, last ended first, after the one that ended
# at %(at)s with the id %(before)s: the root index's order.
ENDED_WORKFLOWS = (
    "SELECT id, kind, state, policy, on_dead, is_open, current_step, total, done, dead,"
    " cancelled, parent_id, parent_step, root_id, idempotency_key, created_at, finished_at"
    " FROM prefork_workflows FORCE INDEX (ix_prefork_workflows_root)"
    " WHERE root_id IS NULL AND state = %(state)s"
    " AND (finished_at < %(at)s OR (finished_at = %(at)s AND id < %(before)s))"
    " ORDER BY finished_at DESC, id DESC LIMIT %(limit)s")

# The workflows nested directly in some ({ids}).
NESTED = ("SELECT id FROM prefork_workflows FORCE INDEX (ix_prefork_workflows_parent)"
          " WHERE parent_id IN ({ids})")

# The ids of the jobs of some workflows ({ids}) in some states, from an id up.
JOB_IDS = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_workflow)"
    " WHERE workflow_id IN ({ids}) AND status IN ({statuses}) AND id >= %(after)s"
    " ORDER BY id LIMIT %(limit)s")

SQL = ViewSql(workflow=WORKFLOW, member_jobs=MEMBER_JOBS, member_workflows=MEMBER_WORKFLOWS,
              callbacks=CALLBACKS, all_workflows=ALL_WORKFLOWS,
              pending_workflows=PENDING_WORKFLOWS, ended_workflows=ENDED_WORKFLOWS,
              nested=NESTED, job_ids=JOB_IDS, listed=named_list)
