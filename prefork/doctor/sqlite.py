"""The checks that apply to a SQLite file: the library, the file (WAL journal, a
local disk), the schema, the plans of the claim and the completion, and the round
trip. There is no server, account, session or second clock to check."""
import sqlite3
from collections.abc import Sequence

from ..config import Config
from ..store.contract import packaged_migrations
from ..store.sqlite import limits_queries as limits_sql
from ..store.sqlite import queries as sqlite_sql
from ..jobs import utc_now
from ..store.sqlite.file import execute_when_free, network_filesystem, stamp
from ..store.sqlite.store import SQLiteStore
from .checks import CLAIM_PLAN, COMPLETION_PLAN, PLAN_CHECKS, Check, Status, run_check, run_checks
from .queries import EXPLAIN_SQLITE, JOURNAL_MODE, REMOVE_SCRATCH_JOB_SQLITE, explained
from .roundtrip import NAME as ROUND_TRIP
from .roundtrip import round_trip

WAL = "wal"
# (label, statement, the index it must search prefork_jobs by) of the claim and
# the completion; the rest of a plan is judged by its words alone.
CLAIM = (("find the next priority", sqlite_sql.NEXT_PRIORITY, "ix_prefork_jobs_claim"),
         ("select the next ready jobs", sqlite_sql.CLAIM_SELECT, "ix_prefork_jobs_claim"),
         ("select the next limited jobs", limits_sql.LIMITED_WAITING, "ix_prefork_jobs_claim"),
         ("reserve them", sqlite_sql.CLAIM_RESERVE, "INTEGER PRIMARY KEY"))
COMPLETION = (("check the lease", sqlite_sql.HOLDS_LEASE, "INTEGER PRIMARY KEY"),
              ("mark it done", sqlite_sql.COMPLETE, "INTEGER PRIMARY KEY"))


def sqlite_checks(store: SQLiteStore, config: Config, queue: str) -> list[Check]:
    conn = _connection(store)
    return [
        Check("sqlite", Status.OK, f"SQLite {sqlite3.sqlite_version} (the library this "
              f"Python links), file {store.path}"),
        run_check("file", lambda: file_check(conn, store.path)),
        run_check("schema", lambda: schema_check(store)),
        *run_checks(PLAN_CHECKS, lambda: [plan_check(CLAIM_PLAN, conn, CLAIM, queue),
                                          plan_check(COMPLETION_PLAN, conn, COMPLETION, queue)]),
        run_check(ROUND_TRIP, lambda: round_trip(
            store, queue, config.lease_seconds, lambda job_id: _remove(store, job_id, queue))),
    ]


def file_check(conn: sqlite3.Connection, path: str) -> Check:
    """WAL, as the store sets it (readers never block the writer); a local disk."""
    mode = str(conn.execute(JOURNAL_MODE).fetchone()[0]).lower()
    if mode != WAL:
        return Check("file", Status.FAIL, f"journal mode {mode}, not WAL: readers and the "
                     "writer would block each other (is the file on a filesystem without "
                     "shared memory?)")
    remote = network_filesystem(path)
    if remote:
        return Check("file", Status.WARN, f"WAL journal, but on a network filesystem "
                     f"({remote}), where SQLite's locking is not reliable: use a local disk, "
                     "or MySQL for more than one host")
    return Check("file", Status.OK, "WAL journal, on a local disk")


def schema_check(store: SQLiteStore) -> Check:
    store.check_schema()   # a file without the schema was refused at open
    return Check("schema", Status.OK,
                 f"current (version {packaged_migrations('sqlite')[-1][0]})")


def judge_plan(details: Sequence[str], index: str) -> list[str]:
    """The problems in EXPLAIN QUERY PLAN's lines: a scan of a table (every row
    read), a temporary B-tree (a sort), prefork_jobs searched by another index."""
    problems = []
    for detail in details:
        if detail.startswith("SCAN ") and "CONSTANT ROW" not in detail:
            problems.append(f"full scan ({detail})")
        if "TEMP B-TREE" in detail:
            problems.append(f"sort ({detail})")
        if detail.startswith("SEARCH prefork_jobs ") and index not in detail:
            problems.append(f"{detail}, expected {index}")
    return problems


def plan_check(name: str, conn: sqlite3.Connection,
               statements: Sequence[tuple[str, str, str]], queue: str) -> Check:
    problems, used = [], []
    for label, sql, index in statements:
        details = [str(row[3]) for row in conn.execute(explained(EXPLAIN_SQLITE, sql),
                                                        _plan_params(queue))]
        problems += [f"{label}: {problem}" for problem in judge_plan(details, index)]
        used.append(f"{label}: {'; '.join(details)}")
    if problems:
        return Check(name, Status.FAIL, "; ".join(problems))
    return Check(name, Status.OK, "; ".join(used))


def _plan_params(queue: str) -> dict[str, object]:
    """Values for every parameter the planned statements name (a plan does not
    depend on them; SQLite wants each bound)."""
    now = stamp(utc_now())
    return {"queue": queue, "now": now, "limit": 32, "priority": 0, "after": -1, "limited": 0,
            "id": 1, "token": "0" * 32,
            "lease_until": now, "worker": "doctor", "process_id": None}


def _remove(store: SQLiteStore, job_id: int, queue: str) -> bool:
    """A file has no accounts: the round trip's job is always deleted."""
    execute_when_free(_connection(store), REMOVE_SCRATCH_JOB_SQLITE,
                      {"id": job_id, "queue": queue}, store.busy_seconds)
    return True


def _connection(store: SQLiteStore) -> sqlite3.Connection:
    assert store.conn is not None, "the store is open"
    return store.conn
