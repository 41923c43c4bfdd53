"""Every statement of the MySQL store's workflows, by name, under the rules of
queries.py. Both dialects send them as they are (plain reads, locking reads and
single-table writes), and so can any MySQL driver an application's transaction
runs on (prefork.enqueue_workflow()).

The statements that store/flows.py runs for both backends take named parameters,
%(name)s (the names of sqlite/workflow_queries.py's :name, which PyMySQL,
mysqlclient and mysql-connector-python all read), and are gathered in SQL at the
end; {ids} and {statuses} take named_list(). The rest, which members.py runs,
take %s as queries.py's do; {lease_pairs} takes queries.lease_pairs().
"""
from collections.abc import Sequence
from typing import Any

from ..flows import FlowSql

# --- producing ------------------------------------------------------------------------

# A workflow row. IGNORE: an outermost workflow's key already taken inserts nothing
# (row count 0), and WORKFLOW_BY_KEY finds it.
INSERT_WORKFLOW = (
    "INSERT IGNORE INTO prefork_workflows (root_id, parent_id, parent_step, kind, state, policy,"
    " on_dead, is_open, total, idempotency_key, created_at, updated_at)"
    " VALUES (%(root_id)s, %(parent_id)s, %(parent_step)s, %(kind)s, %(state)s, %(policy)s,"
    " %(on_dead)s, %(is_open)s, %(total)s, %(key)s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))")

WORKFLOW_BY_KEY = "SELECT id FROM prefork_workflows WHERE idempotency_key = %(key)s"

# One job of a workflow, positional (queue, type, payload, priority, max attempts,
# concurrency key ('' for none), type again, status, workflow id, step). Due now:
# a waiting job's available_at is set again when it is released. Limited as
# queries.ENQUEUE reads it.
MEMBER_ROW = (
    "(%s, %s, %s, %s, %s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), %s,"
    " EXISTS (SELECT 1 FROM prefork_limits WHERE job_type = %s), %s, %s, %s)")

# Many of them at once ({rows}: member_rows()); no key, so no duplicate.
INSERT_MEMBERS = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, priority, max_attempts, available_at,"
    " created_at, updated_at, concurrency_key, limited, status, workflow_id, workflow_step)"
    " VALUES {rows}")

# The jobs just inserted into these workflows ({ids}, positional), from the first id
# inserted on, in id order: the order they were inserted in.
INSERTED_MEMBERS = (
    "SELECT id FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id >= %s AND workflow_id IN ({ids}) ORDER BY id")

# Every job of an outermost workflow and its nested ones, in id order (the order
# they were enqueued in).
JOBS_OF_ROOT = (
    "SELECT j.id FROM prefork_workflows AS w"
    " JOIN prefork_jobs AS j FORCE INDEX (ix_prefork_jobs_workflow) ON j.workflow_id = w.id"
    " WHERE w.id = %(id)s OR w.root_id = %(id)s ORDER BY j.id")

# --- the bookkeeping ------------------------------------------------------------------------

# One workflow row, locked to the end of the transaction (model.Node's column order).
LOCK_WORKFLOW = (
    "SELECT id, parent_id, parent_step, kind, state, policy, on_dead, is_open, current_step,"
    " total, done, dead, cancelled FROM prefork_workflows WHERE id = %(id)s FOR UPDATE")

# Its state, open flag, step and counters written back; finished_at set when it ends.
SAVE_WORKFLOW = (
    "UPDATE prefork_workflows SET state = %(state)s, is_open = %(is_open)s,"
    " current_step = %(current_step)s, total = %(total)s, done = %(done)s, dead = %(dead)s,"
    " cancelled = %(cancelled)s, updated_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(%(state)s IN ('done', 'dead', 'cancelled'),"
    " COALESCE(finished_at, UTC_TIMESTAMP(6)), NULL) WHERE id = %(id)s")

# Release the waiting job at one step: due now, limited as its type is now (a
# rule may have come or gone while it waited).
RELEASE_STEP = (
    "UPDATE prefork_jobs SET status = 'ready', available_at = UTC_TIMESTAMP(6),"
    " updated_at = UTC_TIMESTAMP(6),"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE workflow_id = %(id)s AND workflow_step = %(step)s AND status = 'waiting'")

# Release every waiting member of a group: steps 0 and up.
RELEASE_MEMBERS = (
    "UPDATE prefork_jobs SET status = 'ready', available_at = UTC_TIMESTAMP(6),"
    " updated_at = UTC_TIMESTAMP(6),"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE workflow_id = %(id)s AND workflow_step >= 0 AND status = 'waiting'")

STEP_STATUS = ("SELECT status FROM prefork_jobs"
               " WHERE workflow_id = %(id)s AND workflow_step = %(step)s")

CHILD_AT = "SELECT id FROM prefork_workflows WHERE parent_id = %(id)s AND parent_step = %(step)s"

CHILDREN_AFTER = ("SELECT id FROM prefork_workflows WHERE parent_id = %(id)s"
                  " AND parent_step > %(step)s ORDER BY parent_step")

# A chain's stop: its waiting later members, cancelled with the stop's mark.
CANCEL_WAITING = (
    "UPDATE prefork_jobs SET status = 'cancelled', last_error = %(stopped)s,"
    " finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)"
    " WHERE workflow_id = %(id)s AND workflow_step > %(step)s AND status = 'waiting'")

# Undone by a retry of the step that stopped it.
RESTORE_STOPPED = (
    "UPDATE prefork_jobs SET status = 'waiting', last_error = NULL, finished_at = NULL,"
    " updated_at = UTC_TIMESTAMP(6) WHERE workflow_id = %(id)s AND workflow_step > %(step)s"
    " AND status = 'cancelled' AND last_error = %(stopped)s")

# Where members are ({ids}), their rows locked already: (id, workflow id, step).
PLACES = ("SELECT id, workflow_id, workflow_step FROM prefork_jobs FORCE INDEX (PRIMARY)"
          " WHERE id IN ({ids}) AND workflow_step >= 0")

# The state of jobs a statement just returned ({ids}): (id, status).
STATES_OF = "SELECT id, status FROM prefork_jobs FORCE INDEX (PRIMARY) WHERE id IN ({ids})"

# --- a retry ------------------------------------------------------------------------------------

# Members to retry ({statuses}; queue or NULL), locked, in id order from an id on:
# (id, status, workflow id, step).
MEMBERS_TO_RETRY = (
    "SELECT id, status, workflow_id, workflow_step FROM prefork_jobs"
    " WHERE status IN ({statuses}) AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND workflow_step >= 0 AND id >= %(after)s ORDER BY id LIMIT %(batch)s FOR UPDATE")

# The same of the ids asked for ({ids}).
MEMBER_IDS_TO_RETRY = (
    "SELECT id, status, workflow_id, workflow_step FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE status IN ({statuses}) AND (%(queue)s IS NULL OR queue = %(queue)s)"
    " AND workflow_step >= 0 AND id IN ({ids}) ORDER BY id FOR UPDATE")

# One retried member (its new status, ready or waiting), as queries.RETRY_DEAD_IDS
# retries a job.
RETRY_MEMBER = (
    "UPDATE prefork_jobs SET status = %(status)s, attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = UTC_TIMESTAMP(6),"
    " max_attempts = COALESCE(%(max_attempts)s, max_attempts), updated_at = UTC_TIMESTAMP(6),"
    " limited = EXISTS (SELECT 1 FROM prefork_limits AS l WHERE l.job_type = prefork_jobs.job_type)"
    " WHERE id = %(id)s")

# --- reading ------------------------------------------------------------------------------------

PROGRESS = ("SELECT id, kind, state, total, done, dead, cancelled, is_open"
            " FROM prefork_workflows WHERE id = %(id)s")

# A job's place: (workflow id, kind, step, outermost workflow id).
PLACE_OF = (
    "SELECT w.id, w.kind, j.workflow_step, COALESCE(w.root_id, w.id)"
    " FROM prefork_jobs AS j JOIN prefork_workflows AS w ON w.id = j.workflow_id"
    " WHERE j.id = %(id)s")

# --- the members' paths (members.py), positional -----------------------------------------------

# Of a group of members' leases ({lease_pairs}), lock in id order those whose lease
# is ours and live, or that are done already under it (their completion was
# written by the parent): (id, status, workflow id, step).
LOCK_MEMBER_LEASES = (
    "SELECT id, status, workflow_id, workflow_step FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE (status = 'done' OR (status = 'reserved' AND lease_until > UTC_TIMESTAMP(6)))"
    " AND ({lease_pairs}) ORDER BY id FOR UPDATE")

# Members' claims given back ({lease_pairs}), locked in id order before the
# release: (id, whether their cancellation is pending, workflow id, step).
LOCK_RELEASING = (
    "SELECT id, cancel_requested_at IS NOT NULL, workflow_id, workflow_step"
    " FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE status = 'reserved' AND ({lease_pairs}) ORDER BY id FOR UPDATE")

# Reserved members ({ids}) of a supervisor (its id), locked before a statement
# that returns them: their ids.
LOCK_RESERVED_MEMBERS = (
    "SELECT id FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE id IN ({ids}) AND status = 'reserved' AND process_id = %s ORDER BY id FOR UPDATE")


def member_rows(count: int) -> str:
    """INSERT_MEMBERS's {rows} for `count` jobs."""
    return ", ".join([MEMBER_ROW] * count)


def named_list(prefix: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """("%(prefix_0)s, %(prefix_1)s, ...", {"prefix_0": value, ...}) for an IN (...)."""
    names = {f"{prefix}_{index}": value for index, value in enumerate(values)}
    return ", ".join(f"%({name})s" for name in names), names


SQL = FlowSql(
    insert_workflow=INSERT_WORKFLOW, workflow_by_key=WORKFLOW_BY_KEY, jobs_of_root=JOBS_OF_ROOT,
    workflow_row=LOCK_WORKFLOW, save_workflow=SAVE_WORKFLOW, release_step=RELEASE_STEP,
    release_members=RELEASE_MEMBERS, step_status=STEP_STATUS, child_at=CHILD_AT,
    children_after=CHILDREN_AFTER, cancel_waiting=CANCEL_WAITING,
    restore_stopped=RESTORE_STOPPED, places=PLACES, states_of=STATES_OF,
    members_to_retry=MEMBERS_TO_RETRY, member_ids_to_retry=MEMBER_IDS_TO_RETRY,
    retry_member=RETRY_MEMBER, progress=PROGRESS, place_of=PLACE_OF, listed=named_list)
