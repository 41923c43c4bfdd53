"""Every statement of the SQLite store's limits (limits.py), by name. Values are
bound parameters (:name); {types} is a list of named placeholders
(queries.placeholders) and {groups} one of (type, key) pairs
(group_placeholders()). Times are stored text (file.py).

No statement here locks a row: the limited claim runs in one BEGIN IMMEDIATE
transaction, which holds the database's one write lock from its first read.
"""
from collections.abc import Sequence
from typing import Any

from ...limits.rules import Group


def group_placeholders(groups: Sequence[Group]) -> tuple[str, dict[str, Any]]:
    """("(:type_0, :key_0), (:type_1, :key_1), ...", their values) for a VALUES list."""
    params: dict[str, Any] = {}
    for index, group in enumerate(groups):
        params[f"type_{index}"], params[f"key_{index}"] = group
    return ", ".join(f"(:type_{index}, :key_{index})" for index in range(len(groups))), params


# --- publishing the rules ------------------------------------------------------------------

PUBLISHED_RULES = "SELECT job_type, concurrency, rate_count, rate_seconds FROM prefork_limits"

PUBLISH_LIMIT = (
    "INSERT INTO prefork_limits (job_type, concurrency, rate_count, rate_seconds, updated_at)"
    " VALUES (:job_type, :concurrency, :rate_count, :rate_seconds, :now)"
    " ON CONFLICT (job_type) DO UPDATE SET concurrency = excluded.concurrency,"
    " rate_count = excluded.rate_count, rate_seconds = excluded.rate_seconds,"
    " updated_at = excluded.updated_at")

UNPUBLISH_LIMIT = "DELETE FROM prefork_limits WHERE job_type = :job_type"

# The live jobs of a type whose limit appeared (:limited 1) or went (0).
# updated_at is left alone: on a reserved job it says when its holder last
# wrote (prune_silent()'s JOBS_OF).
FLAG_LIVE_JOBS = (
    "UPDATE prefork_jobs INDEXED BY ix_prefork_jobs_status_type SET limited = :limited"
    " WHERE status IN ('ready', 'reserved') AND job_type = :job_type AND limited <> :limited")

# --- the limited claim ----------------------------------------------------------------------

# The published rules of the claimer's types ({types}): the ones the claim enforces.
RULES_OF = ("SELECT job_type, concurrency, rate_count, rate_seconds FROM prefork_limits"
            " WHERE job_type IN ({types})")

# The slots taken: reserved jobs of the limited types ({types}) per group.
RUNNING_PER_GROUP = (
    "SELECT job_type, concurrency_key, COUNT(*) FROM prefork_jobs"
    " INDEXED BY ix_prefork_jobs_status_type"
    " WHERE status = 'reserved' AND job_type IN ({types}) GROUP BY job_type, concurrency_key")

# The next due limited jobs of one queue in claim order, as planner.Waiting
# (id, type, key); a paused queue has none. The second form passes over the
# groups ({groups}) whose concurrency is taken: one busy key does not hide the
# jobs of others queued behind it.
LIMITED_WAITING = (
    "SELECT id, job_type, concurrency_key FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND limited = 1 AND available_at <= :now"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = :queue AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT :limit")

LIMITED_WAITING_OUTSIDE = (
    "SELECT id, job_type, concurrency_key FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = :queue AND limited = 1 AND available_at <= :now"
    " AND (job_type, concurrency_key) NOT IN (VALUES {groups})"
    " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = :queue AND paused = 1)"
    " ORDER BY priority, available_at, id LIMIT :limit")

# A group's row: a rate-limited group's token bucket, made holding
# planner.FIRST_TOKENS the first time a job of the group waits, read, and
# written after its starts; a group without a rate gets it at its first start.
ENSURE_BUCKET = (
    "INSERT INTO prefork_limit_groups (job_type, concurrency_key, tokens, refilled_at)"
    " VALUES (:job_type, :key, :tokens, :now) ON CONFLICT (job_type, concurrency_key) DO NOTHING")

BUCKET = ("SELECT tokens, refilled_at FROM prefork_limit_groups"
          " WHERE job_type = :job_type AND concurrency_key = :key")

SPEND_TOKENS = ("UPDATE prefork_limit_groups SET tokens = :tokens, refilled_at = :refilled_at"
                " WHERE job_type = :job_type AND concurrency_key = :key")

# A chosen job, in the column order claimed_job() unpacks, then whether it is a
# workflow's member (reserved with queries.CLAIM_RESERVE, as the plain claim's).
LIMITED_CLAIM_ROW = (
    "SELECT id, job_type, queue, payload, attempts, max_attempts, idempotency_key, crashes,"
    " workflow_step >= 0 FROM prefork_jobs WHERE id = :id AND status = 'ready'")

# Oldest first, a bounded batch per statement: groups whose bucket has not
# been written since :before (refilled since, or never rate-limited again).
PRUNE_LIMIT_GROUPS = (
    "DELETE FROM prefork_limit_groups WHERE (job_type, concurrency_key) IN"
    " (SELECT job_type, concurrency_key FROM prefork_limit_groups"
    " INDEXED BY ix_prefork_limit_groups_refilled WHERE refilled_at < :before"
    " ORDER BY refilled_at LIMIT :batch)")

# --- visibility ------------------------------------------------------------------------------

# Per group of a published rule: running (reserved) and waiting (due, ready)
# jobs, and the rule, for the groups with either. CROSS JOIN: the rules first,
# then the live jobs of their types alone (never those of unlimited types).
LIMIT_USAGE = (
    "SELECT j.job_type, j.concurrency_key, SUM(j.status = 'reserved') AS running,"
    " SUM(j.status = 'ready' AND j.available_at <= :now) AS waiting,"
    " l.concurrency, l.rate_count, l.rate_seconds"
    " FROM prefork_limits AS l CROSS JOIN prefork_jobs AS j"
    " INDEXED BY ix_prefork_jobs_status_type"
    " ON j.status IN ('ready', 'reserved') AND j.job_type = l.job_type"
    " GROUP BY j.job_type, j.concurrency_key, l.concurrency, l.rate_count, l.rate_seconds"
    " HAVING running > 0 OR waiting > 0 ORDER BY j.job_type, j.concurrency_key")
