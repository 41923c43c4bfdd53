"""What only the SQLite store has to prove about limits and cancellation (issue 16):
migration 0006 rebuilds the job table of a file in use and keeps its ids, its
AUTOINCREMENT counter, every index, the results' trigger and its integrity; the
limited claim is serialised across processes by BEGIN IMMEDIATE alone; a running
job's pending cancel ends it cancelled on every path out of 'reserved'. The
contract on every backend is in test_limits_store.py and test_cancel_store.py.
"""
import multiprocessing
import sqlite3
from contextlib import closing

import pytest

import prefork
from prefork import config as config_module
from prefork.jobs import JobStatus, new_job
from prefork.limits.rules import LimitRule, Rate
from prefork.retry import Decision, RetryPolicy
from prefork.store.contract import packaged_migrations
from prefork.store.sqlite.file import parse_dsn, split_statements
from prefork.store.sqlite.store import SQLiteStore

WORKER = "test-host:1"
FORK = multiprocessing.get_context("fork")
PROCESSES = 8

# Every index and trigger of prefork_jobs after 0006, with its columns.
JOB_INDEXES = {
    "uq_prefork_jobs_queue_key": ["queue", "idempotency_key"],
    "ix_prefork_jobs_claim": ["status", "queue", "limited", "priority", "available_at", "id"],
    "ix_prefork_jobs_lease": ["status", "lease_until"],
    "ix_prefork_jobs_finished": ["status", "finished_at"],
    "ix_prefork_jobs_status": ["status", "id"],
    "ix_prefork_jobs_status_queue": ["status", "queue", "id"],
    "ix_prefork_jobs_status_type": ["status", "job_type", "id"],
    "ix_prefork_jobs_key": ["idempotency_key"],
    "ix_prefork_jobs_created": ["created_at"],
    "ix_prefork_jobs_cancel": ["cancel_requested_at"],
    "ix_prefork_jobs_workflow": ["workflow_id", "workflow_step"],
}
# What migrate() applies to a file of the version before 0006: 0006 and every later one.
SINCE_0006 = [version for version, _, _ in packaged_migrations("sqlite") if version >= 6]

# The previous version's own statements (before 0006), as a store of that version
# holds them prepared on a connection opened before the upgrade.
PREVIOUS_ENQUEUE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at)"
    " VALUES ('default', 'old', '{}', NULL, 0, 5, :now, :now, :now)")
PREVIOUS_CLAIM = (
    "SELECT id FROM prefork_jobs INDEXED BY ix_prefork_jobs_claim"
    " WHERE status = 'ready' AND queue = 'default' AND available_at <= :now"
    " ORDER BY priority, available_at, id LIMIT 1")
PREVIOUS_COMPLETE = "UPDATE prefork_jobs SET status = 'done', finished_at = :now WHERE id = :id"
NOW = "2026-01-01 00:00:00.000000"


def sqlite_config(dsn, **overrides):
    return config_module.load({"dsn": dsn, **{k: str(v) for k, v in overrides.items()}},
                              environ={})


def file_before_0006(tmp_path):
    """A new file with schema versions 1 to 5 only, as the previous version made it."""
    dsn = f"sqlite:///{tmp_path / 'old.db'}"
    store = SQLiteStore(sqlite_config(dsn), create=True)
    store.close()
    conn = sqlite3.connect(parse_dsn(dsn), isolation_level=None)
    conn.execute("CREATE TABLE prefork_schema_migrations (version INTEGER NOT NULL PRIMARY KEY,"
                 " name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for version, name, sql in packaged_migrations("sqlite"):
        if version < 6:
            for statement in split_statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO prefork_schema_migrations VALUES (?, ?, ?)",
                         (version, name, NOW))
    conn.close()
    return dsn


def jobs_and_results(conn):
    """Jobs in every old state, two task results, and the newest job pruned."""
    for number in range(1, 8):
        conn.execute(PREVIOUS_ENQUEUE, {"now": NOW})
    conn.execute("UPDATE prefork_jobs SET status = 'reserved', lease_token = 't', lease_until = ?,"
                 " locked_by = 'h:1', process_id = 3, attempts = 1 WHERE id = 2", (NOW,))
    conn.execute("UPDATE prefork_jobs SET status = 'done', finished_at = ? WHERE id = 3", (NOW,))
    conn.execute("UPDATE prefork_jobs SET status = 'dead', last_error = 'boom',"
                 " error_history = '[]', finished_at = ? WHERE id = 4", (NOW,))
    for job_id in (3, 4):
        conn.execute("INSERT INTO prefork_task_results (job_id, attempt, worker, started_at,"
                     " finished_at) VALUES (?, 1, 'h:1', ?, ?)", (job_id, NOW, NOW))
    conn.execute("DELETE FROM prefork_jobs WHERE id = 7")   # pruned: the counter stays at 7


def rows(conn):
    return conn.execute("SELECT id, queue, job_type, payload, status, attempts, lease_token,"
                        " locked_by, process_id, last_error, error_history, created_at,"
                        " finished_at FROM prefork_jobs ORDER BY id").fetchall()


def test_migrating_a_file_with_jobs_keeps_ids_counter_indexes_trigger_and_integrity(tmp_path):
    dsn = file_before_0006(tmp_path)
    conn = sqlite3.connect(parse_dsn(dsn), isolation_level=None)
    jobs_and_results(conn)
    before = rows(conn)
    store = SQLiteStore(sqlite_config(dsn))
    assert store.migrate() == SINCE_0006
    assert rows(conn) == before
    assert conn.execute("SELECT concurrency_key, limited, cancel_requested_at FROM prefork_jobs"
                        " GROUP BY 1, 2, 3").fetchall() == [("", 0, None)]
    assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'prefork_jobs'"
                        ).fetchone() == (7,)
    assert store.enqueue(new_job("after")) == 8   # never the pruned 7
    indexes = {name: [column[2] for column in conn.execute(f"PRAGMA index_info({name})")]
               for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'"
                                           " AND tbl_name = 'prefork_jobs'"
                                           " AND name NOT LIKE 'sqlite_%'")}
    assert indexes == JOB_INDEXES
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store.discard_dead([4])   # the trigger still deletes a job's results with it
    assert conn.execute("SELECT job_id FROM prefork_task_results").fetchall() == [(3,)]
    store.prune_finished(JobStatus.DONE, -60)
    assert conn.execute("SELECT COUNT(*) FROM prefork_task_results").fetchone() == (0,)
    assert store.migrate() == []
    store.close()
    conn.close()


@pytest.mark.parametrize("inserted", [0, 3], ids=["never-a-job", "all-pruned"])
def test_the_counter_survives_a_table_emptied_or_never_written(tmp_path, inserted):
    dsn = file_before_0006(tmp_path)
    conn = sqlite3.connect(parse_dsn(dsn), isolation_level=None)
    for _ in range(inserted):
        conn.execute(PREVIOUS_ENQUEUE, {"now": NOW})
    conn.execute("DELETE FROM prefork_jobs")
    store = SQLiteStore(sqlite_config(dsn))
    store.migrate()
    assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'prefork_jobs'"
                        ).fetchone() == (inserted,)
    assert store.enqueue(new_job("after")) == inserted + 1
    store.close()
    conn.close()


def test_a_connection_of_the_previous_version_keeps_working_across_the_migration(tmp_path):
    """Its statements were prepared against the old table: SQLite prepares them again
    on the rebuilt one, and the new version claims what it enqueued."""
    dsn = file_before_0006(tmp_path)
    previous = sqlite3.connect(parse_dsn(dsn), isolation_level=None)
    previous.execute("PRAGMA journal_mode = WAL")
    previous.execute(PREVIOUS_ENQUEUE, {"now": NOW})
    claimed = previous.execute(PREVIOUS_CLAIM, {"now": NOW}).fetchone()[0]
    store = SQLiteStore(sqlite_config(dsn))
    assert store.migrate() == SINCE_0006
    previous.execute(PREVIOUS_COMPLETE, {"now": NOW, "id": claimed})
    previous.execute(PREVIOUS_ENQUEUE, {"now": NOW})
    assert previous.execute(PREVIOUS_CLAIM, {"now": NOW}).fetchone()[0] == claimed + 1
    assert [job.id for job in store.claim(["default"], WORKER, 30)] == [claimed + 1]
    assert store.get(claimed)["status"] == JobStatus.DONE
    store.close()
    previous.close()


# --- the limited claim across processes -------------------------------------------------

def claim_limited_once(start, results, dsn, rules):
    """In a forked child: its own store, one limited claim at the same moment as the others."""
    try:
        start.wait(30)
        store = SQLiteStore(sqlite_config(dsn))
        jobs, _ = store.claim_limited(["default"], f"child:{id(store)}", 30, 4, None, rules)
        store.close()
        results.put(("ok", [job.id for job in jobs]))
    except BaseException as exc:   # reported to the parent, which fails the test
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def test_processes_claiming_limited_jobs_at_once_never_exceed_a_groups_limit(sqlite_store,
                                                                            sqlite_migrated):
    rules = {"report": LimitRule("report", concurrency=2)}
    store = sqlite_store()
    store.publish_limits(list(rules.values()), ["report"])
    for key in ("a", "b", "c"):
        store.enqueue_many([new_job("report", concurrency_key=key) for _ in range(10)])
    start, results = FORK.Event(), FORK.Queue()
    procs = [FORK.Process(target=claim_limited_once,
                          args=(start, results, sqlite_migrated, rules))
             for _ in range(PROCESSES)]
    try:
        for proc in procs:
            proc.start()
        start.set()
        reports = [results.get(timeout=120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    assert all(status == "ok" for status, _ in reports), reports
    claimed = [job_id for _, ids in reports for job_id in ids]
    assert len(claimed) == len(set(claimed)) == 6
    usage = {(use.key, use.running) for use in store.limit_usage()}
    assert usage == {("a", 2), ("b", 2), ("c", 2)}


def test_a_rate_group_spends_its_bucket_and_idle_groups_are_pruned(sqlite_store, sqlite_db):
    rules = {"api": LimitRule("api", rate=Rate(1, 3600)),
             "report": LimitRule("report", concurrency=1)}
    store = sqlite_store()
    store.publish_limits(list(rules.values()), list(rules))
    store.enqueue_many([new_job(job_type) for job_type in ("api", "api", "report")])
    jobs, retry_after = store.claim_limited(["default"], WORKER, 30, 10, None, rules)
    assert sorted(job.type for job in jobs) == ["api", "report"]
    assert 3590 < retry_after <= 3600   # the next api token, an hour after the first
    assert sqlite_db.conn.execute("SELECT job_type, tokens FROM prefork_limit_groups"
                                  " ORDER BY job_type").fetchall() == [("api", 0.0),
                                                                       ("report", 1.0)]
    store.prune_processes(-60)
    assert sqlite_db.scalar("SELECT COUNT(*) FROM prefork_limit_groups") == 0


def test_a_retried_job_is_limited_as_its_type_is_now(sqlite_store, sqlite_db):
    store = sqlite_store()
    job_id = store.enqueue(new_job("report"))
    store.cancel([job_id])
    store.publish_limits([LimitRule("report", concurrency=1)], ["report"])
    assert store.retry_dead([job_id], statuses=[JobStatus.CANCELLED]) == 1
    assert sqlite_db.row(job_id)["limited"] == 1
    assert store.claim(["default"], WORKER, 30) == []
    store.publish_limits([], ["report"])
    assert sqlite_db.row(job_id)["limited"] == 0


# --- cancellation ----------------------------------------------------------------------------

def test_cancel_on_an_application_connection_rides_on_its_transaction(sqlite_store, sqlite_db):
    store = sqlite_store()
    job_id = store.enqueue(new_job("noop"))
    app = sqlite_db.app_connection()
    with closing(app.cursor()) as cursor:
        app.execute("BEGIN")
        assert prefork.store.sqlite.store.cancel_on(cursor, [job_id, job_id + 1]) == \
            ([job_id], [], [], [job_id + 1])
    app.rollback()
    assert store.get(job_id)["status"] == JobStatus.READY
    with closing(app.cursor()) as cursor:
        prefork.store.sqlite.store.cancel_on(cursor, [job_id])
    app.commit()
    app.close()
    assert store.get(job_id)["status"] == JobStatus.CANCELLED


def test_a_cancel_request_leaves_the_holders_last_write_time(sqlite_store, sqlite_db):
    """prune_silent() spares a job by how long ago its holder wrote (updated_at)."""
    store = sqlite_store()
    store.enqueue(new_job("noop"))
    job = store.claim(["default"], WORKER, 30)[0]
    written = sqlite_db.row(job.id)["updated_at"]
    assert store.cancel([job.id]).stopping == [job.id]
    assert sqlite_db.row(job.id)["updated_at"] == written
    assert store.get(job.id)["cancel_requested_at"] is not None


def _fail(store, job, db):
    return store.fail(job, "boom", Decision(dead=False, delay=0))


def _release(store, job, db):
    return store.release(job)


def _hand_back(store, job, db):
    return store.hand_back(job.id, job.lease_token, "SIGKILL", RetryPolicy(), 3) \
        == JobStatus.CANCELLED


def _expire(store, job, db):
    db.execute("UPDATE prefork_jobs SET lease_until = '2000-01-01 00:00:00.000000'"
               " WHERE id = %s", (job.id,))
    return store.recover_expired() == 1


def _supervisor_vanishes(store, job, db):
    db.execute("UPDATE prefork_processes SET heartbeat_at = '2000-01-01 00:00:00.000000'")
    return store.prune_silent(60) == [(db.scalar("SELECT id FROM prefork_processes"), 1)]


@pytest.mark.parametrize("leave", [_fail, _release, _hand_back, _expire, _supervisor_vanishes],
                         ids=lambda leave: leave.__name__.strip("_"))
def test_a_running_job_asked_to_cancel_ends_cancelled_on_every_way_out(sqlite_store, sqlite_db,
                                                                       leave):
    store = sqlite_store()
    process_id = store.register_process("h", 1, ["default"], 1, "test")
    store.enqueue(new_job("noop"))
    job = store.claim(["default"], WORKER, 30, process_id=process_id)[0]
    store.cancel([job.id])
    assert store.cancel_requested(process_id) == {job.id}
    assert leave(store, job, sqlite_db)
    row = store.get(job.id)
    assert (row["status"], row["cancel_requested_at"]) == (JobStatus.CANCELLED, None)
    assert row["finished_at"] is not None
    assert store.cancel_requested(process_id) == set()
    assert store.count_finished(JobStatus.CANCELLED, -60) == 1
    assert store.prune_finished(JobStatus.CANCELLED, -60) == 1


def test_a_job_completed_before_its_cancel_took_effect_stays_done(sqlite_store):
    store = sqlite_store()
    store.enqueue(new_job("noop"))
    job = store.claim(["default"], WORKER, 30)[0]
    store.cancel([job.id])
    assert store.complete(job)
    row = store.get(job.id)
    assert (row["status"], row["cancel_requested_at"]) == (JobStatus.DONE, None)
