"""The plans of the claim's and the completion's statements, as the chosen dialect
sends them (read from its queries module), EXPLAINed on the operator's server: no
filesort, no full scan, the index each statement was written for.

An empty table is planned as a scan of nothing, which says nothing of a working
queue: the statements are EXPLAINed over a few hundred scratch jobs inserted in
a transaction that is rolled back. They go into a scratch copy of prefork_jobs
(a temporary table with its columns and indexes, seen by this session alone, in
place of the real one), so the real table's ids are untouched: an AUTO_INCREMENT
moves on even for rows rolled back. An account that may not create temporary
tables gets the plans over the real table, and the checks say that its ids moved on.
"""
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.constants import ER

from ..store.mysql import completion_queries as completion_sql
from ..store.mysql import due_queries as due_sql
from ..store.mysql import limit_queries as limits_sql
from ..store.mysql import portable_queries as mysql_sql
from ..store.mysql import queries as mariadb_sql
from ..store.mysql.server import Flavor, Server
from ..store.mysql.session import error_code
from .checks import CLAIM_PLAN, COMPLETION_PLAN, Check, Status
from .queries import (
    CREATE_SCRATCH_JOBS,
    DROP_SCRATCH_COPY,
    DROP_SCRATCH_JOBS,
    EXPLAIN_MARIADB,
    EXPLAIN_MYSQL,
    PLAN_JOB,
    SCRATCH_AS_JOBS,
    explained,
)
from .roundtrip import JOB_TYPE

PLAN_JOBS = 200
# Extra words of a row the server answers without reading a table: a lookup by a
# unique key that found no row matching the rest of the WHERE (our scratch jobs
# are ready, not reserved). The lookup is still by that key.
CONST_LOOKUPS = ("Impossible WHERE noticed after reading const tables",
                 "no matching row in const table")
FULL_SCANS = {"ALL": "full table scan", "index": "full index scan"}


@dataclass(frozen=True)
class Scratch:
    """What the EXPLAINed statements are given: the scratch queue and one of its jobs."""
    queue: str
    job_id: int
    token: str = "0" * 32


@dataclass(frozen=True)
class Planned:
    """One statement of the claim or the completion, and the index each table it
    reads must be read by ({table as EXPLAIN names it: index})."""
    label: str
    sql: str
    args: Callable[[Scratch], Sequence[Any]]
    indexes: dict[str, str]


def mariadb_statements() -> tuple[list[Planned], list[Planned]]:
    """(claim, completion) of the mariadb dialect (store/mysql/queries.py)."""
    one_lease, one_level = mariadb_sql.lease_pairs(1), due_sql.levels(1)
    claim = [
        _due_levels(),
        Planned("lock the next ready jobs", mariadb_sql.LOCK_NEXT_READY.format(levels=one_level),
                lambda s: (s.queue, 0, s.queue, 32),
                {"prefork_jobs": "ix_prefork_jobs_claim", "prefork_queue_states": "PRIMARY"}),
        Planned("reserve them", mariadb_sql.RESERVE_LOCKED,
                lambda s: (secrets.token_hex(16), 60_000_000, "doctor", None), {"j": "PRIMARY"}),
        *_limited_claim(),
    ]
    completion = [
        Planned("lock a group's leases",
                mariadb_sql.LOCK_LEASED_GROUP.format(lease_pairs=one_lease),
                lambda s: (s.job_id, s.token), {"prefork_jobs": "PRIMARY"}),
        Planned("mark the group done",
                mariadb_sql.COMPLETE_LOCKED_GROUP.format(lease_pairs=one_lease),
                lambda s: (s.job_id, s.token), {"j": "PRIMARY"}),
        *_single_completion(),
    ]
    return claim, completion


def _due_levels(limited: bool = False) -> Planned:
    """Where the due jobs (or the due limited jobs) are (due_queries.py), over two
    queues as a claim of a worker of several queues asks: both dialects send it."""
    return Planned("find the due limited priorities" if limited else "find the due priorities",
                   due_sql.due_levels(2, limited), lambda s: (s.queue, s.queue + "-next"),
                   {"prefork_jobs": "ix_prefork_jobs_claim", "prefork_queue_states": "PRIMARY"})


def _limited_claim() -> list[Planned]:
    """The limited claim's reads and locks (limits.py): both dialects send these."""
    one_group, one_id = limits_sql.group_pairs(1), mariadb_sql.placeholders(1)
    return [
        _due_levels(limited=True),
        Planned("read the waiting limited jobs",
                limits_sql.READ_WAITING.format(levels=due_sql.levels(1), groups=one_group),
                lambda s: (s.queue, 0, s.queue, "", "", 256),
                {"prefork_jobs": "ix_prefork_jobs_claim", "g": "PRIMARY",
                 "prefork_queue_states": "PRIMARY"}),
        Planned("lock their groups", limits_sql.LOCK_GROUPS.format(groups=one_group),
                lambda s: (JOB_TYPE, ""), {"prefork_limit_groups": "PRIMARY"}),
        Planned("lock the planned jobs", limits_sql.LOCK_PLANNED.format(ids=one_id),
                lambda s: (s.job_id,), {"prefork_jobs": "PRIMARY"}),
    ]


def _single_completion() -> list[Planned]:
    """A handler's own transaction (job.transaction()): both dialects send these."""
    return [
        Planned("fence, lock and mark it done", completion_sql.COMPLETE,
                lambda s: (s.job_id, s.token),
                {"prefork_jobs": "PRIMARY"}),
    ]


def mysql_statements() -> tuple[list[Planned], list[Planned]]:
    """(claim, completion) of the mysql dialect (store/mysql/portable_queries.py; a
    handler's own transaction completes with the statements both dialects share)."""
    one_id, one_lease = mariadb_sql.placeholders(1), mariadb_sql.lease_pairs(1)
    one_level = due_sql.levels(1)
    claim = [
        _due_levels(),
        Planned("lock the next ready jobs", mysql_sql.LOCK_NEXT_READY_IDS.format(levels=one_level),
                lambda s: (s.queue, 0, s.queue, 32),
                {"prefork_jobs": "ix_prefork_jobs_claim", "prefork_queue_states": "PRIMARY"}),
        Planned("reserve them", mysql_sql.RESERVE_IDS.format(ids=one_id),
                lambda s: (secrets.token_hex(16), 60_000_000, "doctor", None, s.job_id),
                {"prefork_jobs": "PRIMARY"}),
        Planned("read them back", mysql_sql.READ_BACK_IDS.format(ids=one_id),
                lambda s: (s.job_id, secrets.token_hex(16)), {"prefork_jobs": "PRIMARY"}),
        *_limited_claim(),
    ]
    completion = [
        Planned("mark a group done", mysql_sql.COMPLETE_LEASED.format(lease_pairs=one_lease),
                lambda s: (s.job_id, s.token), {"prefork_jobs": "PRIMARY"}),
        Planned("read which are done", mysql_sql.DONE_UNDER_LEASES.format(lease_pairs=one_lease),
                lambda s: (s.job_id, s.token), {"prefork_jobs": "PRIMARY"}),
        *_single_completion(),
    ]
    return claim, completion


DIALECT_STATEMENTS: dict[Flavor, Callable[[], tuple[list[Planned], list[Planned]]]] = {
    Flavor.MARIADB: mariadb_statements,
    Flavor.MYSQL: mysql_statements,
}


def judge_rows(rows: Sequence[dict[str, Any]],
               indexes: dict[str, str]) -> tuple[list[str], list[str]]:
    """(problems, what was used) of one statement's EXPLAIN rows. Derived tables
    and JSON_TABLE's id lists are bounded by the claim's limit: not judged."""
    problems, used = [], []
    for row in rows:
        table, access, key = row.get("table"), row.get("type"), row.get("key")
        extra = row.get("Extra") or ""
        if table is None or str(table).startswith("<") or "Table function" in extra:
            if any(words in extra for words in CONST_LOOKUPS):
                used.append("a unique-key lookup")
            continue
        if "Using filesort" in extra:
            problems.append(f"{table}: Using filesort")
        if access in FULL_SCANS:
            problems.append(f"{table}: {FULL_SCANS[access]} (type {access})")
        wanted = indexes.get(table)
        if wanted and key != wanted:
            problems.append(f"{table}: key {key or 'none'}, expected {wanted}")
        used.append(f"{table} by {key or 'no index'} ({access})")
    return problems, used


def explain(conn: pymysql.connections.Connection, server: Server, statement: Planned,
            scratch: Scratch) -> list[dict[str, Any]]:
    prefix = EXPLAIN_MYSQL if server.flavor is Flavor.MYSQL else EXPLAIN_MARIADB
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute(explained(prefix, statement.sql), statement.args(scratch))
        return list(cursor.fetchall())


def plan_checks(conn: pymysql.connections.Connection, server: Server, dialect: Flavor,
                queue: str) -> list[Check]:
    """The "claim plan" and "completion plan" checks, over scratch jobs rolled back (in
    a scratch copy of prefork_jobs when the account may make one)."""
    claim, completion = DIALECT_STATEMENTS[dialect]()
    in_copy = _hide_jobs_behind_a_copy(conn)
    try:
        conn.begin()
        try:
            with conn.cursor() as cursor:
                cursor.executemany(PLAN_JOB, [(queue, JOB_TYPE)] * PLAN_JOBS)
                scratch = Scratch(queue, int(cursor.lastrowid))
            checks = [_judged(CLAIM_PLAN, conn, server, claim, scratch),
                      _judged(COMPLETION_PLAN, conn, server, completion, scratch)]
        finally:
            conn.rollback()
    finally:
        if in_copy:
            _execute(conn, DROP_SCRATCH_JOBS)
    if in_copy:
        return checks
    return [Check(check.name, check.status, f"{check.detail}; {IN_THE_REAL_TABLE}")
            for check in checks]


# What the plans' details say when the scratch jobs went into the real table.
IN_THE_REAL_TABLE = (f"the {PLAN_JOBS} scratch jobs, rolled back, moved prefork_jobs' ids on "
                     f"by {PLAN_JOBS} (this account may not create a temporary table to hold "
                     "them)")
# A temporary table refused to the account: no CREATE TEMPORARY TABLES on the database,
# or (MySQL) no ALTER on the copy's new name.
DENIED = frozenset({ER.DBACCESS_DENIED_ERROR, ER.TABLEACCESS_DENIED_ERROR})


def _hide_jobs_behind_a_copy(conn: pymysql.connections.Connection) -> bool:
    """Put an empty scratch copy of prefork_jobs in its place for this session: True;
    False (nothing changed) when the account may not create temporary tables."""
    try:
        _execute(conn, CREATE_SCRATCH_JOBS)
        _execute(conn, SCRATCH_AS_JOBS)
    except pymysql.err.MySQLError as exc:
        if error_code(exc) not in DENIED:
            raise
        _execute(conn, DROP_SCRATCH_COPY)
        return False
    return True


def _execute(conn: pymysql.connections.Connection, statement: str) -> None:
    with conn.cursor() as cursor:
        cursor.execute(statement)


def _judged(name: str, conn: pymysql.connections.Connection, server: Server,
            statements: Sequence[Planned], scratch: Scratch) -> Check:
    problems, used = [], []
    for statement in statements:
        found, reads = judge_rows(explain(conn, server, statement, scratch), statement.indexes)
        problems += [f"{statement.label}: {problem}" for problem in found]
        used.append(f"{statement.label}: {', '.join(reads) or 'no table read'}")
    if problems:
        return Check(name, Status.FAIL, "; ".join(problems))
    return Check(name, Status.OK, "; ".join(used) + " (no filesort, no full scan)")
