"""The store contract, points 1-5 and 7 of PRODUCT.md, on every backend.

Each test runs once on a real MariaDB/MySQL server and once on a SQLite file
(the `backend` fixture), so a behaviour cannot drift between them. The
EXPLAIN checks are per backend; SQLite's multi-process tests are in
test_sqlite.py.
"""
import json
import threading

import pymysql
import pytest

import prefork
from prefork.errors import LeaseLost, UserError
from prefork.jobs import new_job
from prefork.retry import Decision
from prefork.store.mysql import queries as mysql_queries
from prefork.store.mysql.due_queries import levels
from prefork.store.sqlite import queries as sqlite_queries
from prefork.wakeups import doorbell

WORKER = "test-host:1"


def claim_one(store, lease=30.0, queues=("default",)):
    jobs = store.claim(list(queues), WORKER, lease)
    assert len(jobs) == 1, f"expected one claimed job, got {jobs}"
    return jobs[0]


def test_same_queue_and_key_returns_the_same_job(backend_store, db):
    s = backend_store()
    first = s.enqueue(new_job("noop", {"n": 1}, key="order-7"))
    again = s.enqueue(new_job("noop", {"n": 2}, key="order-7"))
    other_queue = s.enqueue(new_job("noop", {"n": 1}, key="order-7", queue="mail"))
    assert again == first
    assert other_queue != first
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 2
    assert db.row(first)["payload"] == '{"n":1}'


def test_bulk_enqueue_counts_only_new_rows(backend_store, db):
    s = backend_store()
    s.enqueue(new_job("noop", key="k1"))
    added = s.enqueue_many([new_job("noop", key=f"k{i}") for i in range(5)] + [new_job("noop")])
    assert added == 5  # k1 existed already; the keyless job is new
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 6


def test_enqueue_rides_on_the_callers_transaction(db):
    conn = db.app_connection()
    try:
        job_id = prefork.enqueue(conn, "noop", {"x": 1}, key="tx-1")
        conn.rollback()
        assert db.row(job_id) is None, "enqueue must not commit on its own"
        job_id = prefork.enqueue(conn, "noop", {"x": 1}, key="tx-1")
        conn.commit()
        assert db.row(job_id)["status"] == "ready"
    finally:
        conn.close()


def test_claim_commits_the_reservation_before_returning(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    job = claim_one(s)
    row = db.row(job_id)  # read from another connection: already committed
    assert row["status"] == "reserved" and row["attempts"] == 1
    assert row["lease_token"] == job.lease_token and len(job.lease_token) == 32
    assert row["locked_by"] == WORKER and row["lease_until"] > row["updated_at"]


def test_claim_order_priority_then_age_and_delay_respected(backend_store):
    s = backend_store()
    late = s.enqueue(new_job("noop", priority=5))
    early = s.enqueue(new_job("noop", priority=0))
    s.enqueue(new_job("noop", priority=-1, delay=3600))  # delayed: not ready yet
    second_early = s.enqueue(new_job("noop", priority=0))
    order = [claim_one(s).id for _ in range(3)]
    assert order == [early, second_early, late]
    assert s.claim(["default"], WORKER, 30) == []


def test_queues_are_tried_in_the_given_order(backend_store):
    s = backend_store()
    low = s.enqueue(new_job("noop", queue="low"))
    high = s.enqueue(new_job("noop", queue="high"))
    assert claim_one(s, queues=("high", "low")).id == high
    assert claim_one(s, queues=("high", "low")).id == low


def test_concurrent_claimers_never_share_a_job(backend_store, db):
    seed = backend_store()
    seed.enqueue_many([new_job("noop") for _ in range(400)])
    claimed, errors = [], []

    def claimer():
        s = backend_store()
        try:
            while True:
                jobs = s.claim(["default"], WORKER, 30, limit=3)
                if not jobs:
                    return
                claimed.extend(job.id for job in jobs)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert len(claimed) == 400 and len(set(claimed)) == 400
    assert db.scalar("SELECT MAX(attempts) FROM prefork_jobs") == 1


def test_stale_token_can_neither_complete_nor_fail(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    stale = claim_one(s, lease=0.2)
    db.sleep(0.3)
    assert s.recover_expired() == 1
    fresh = claim_one(s)
    assert fresh.id == job_id and fresh.lease_token != stale.lease_token
    assert not s.complete(stale)
    assert not s.fail(stale, "Boom", Decision(dead=True, delay=0))
    assert not s.extend(stale, 60)
    assert not s.release(stale)
    with pytest.raises(LeaseLost):
        with stale.transaction() as cursor:
            cursor.execute(db.sql("INSERT INTO ledger VALUES ('stale', %s)"), (job_id,))
    assert db.scalar("SELECT COUNT(*) FROM ledger") == 0
    assert db.row(job_id)["status"] == "reserved"
    assert s.complete(fresh)
    assert db.row(job_id)["status"] == "done"
    assert not s.complete(stale)   # done, but under another lease: not the stale one's


def test_expired_lease_cannot_complete_even_before_recovery(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    job = claim_one(s, lease=0.1)
    db.sleep(0.2)
    assert not s.complete(job)
    assert db.row(job_id)["status"] == "reserved"


def test_effect_and_completion_commit_together(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("ledger", key="effect-1"))
    job = claim_one(s)
    with job.transaction() as cursor:
        cursor.execute(db.sql("INSERT INTO ledger VALUES (%s, %s)"),
                           (job.idempotency_key, job.id))
        # Not visible to others before the commit.
        assert db.scalar("SELECT COUNT(*) FROM ledger") == 0
    assert job.finished
    assert db.row(job_id)["status"] == "done"
    assert db.scalar("SELECT COUNT(*) FROM ledger") == 1


def test_effect_is_rolled_back_when_the_handler_raises(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("ledger", key="effect-2"))
    job = claim_one(s)
    with pytest.raises(RuntimeError):
        with job.transaction() as cursor:
            cursor.execute(db.sql("INSERT INTO ledger VALUES (%s, %s)"),
                           (job.idempotency_key, job.id))
            raise RuntimeError("handler broke after writing")
    assert db.scalar("SELECT COUNT(*) FROM ledger") == 0
    assert db.row(job_id)["status"] == "reserved"


def test_fail_schedules_retry_or_dead(backend_store, db):
    s = backend_store()
    retry_id = s.enqueue(new_job("noop"))
    dead_id = s.enqueue(new_job("noop"))
    assert s.fail(claim_one(s), "ValueError", Decision(dead=False, delay=3600))
    assert s.fail(claim_one(s), "unknown job type", Decision(dead=True, delay=0))
    retry, dead = db.row(retry_id), db.row(dead_id)
    assert retry["status"] == "ready" and retry["lease_token"] is None
    assert (retry["available_at"] - retry["updated_at"]).total_seconds() == pytest.approx(3600, abs=1)
    assert dead["status"] == "dead" and dead["last_error"] == "unknown job type"
    assert dead["finished_at"] is not None
    assert s.claim(["default"], WORKER, 30) == []  # the retry waits for its backoff


def test_release_restores_the_attempt(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    job = claim_one(s)
    assert s.release(job)
    row = db.row(job_id)
    assert row["status"] == "ready" and row["attempts"] == 0 and row["lease_token"] is None
    assert claim_one(s).attempt == 1


def test_extend_pushes_the_lease_out(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    job = claim_one(s, lease=1)
    before = db.row(job_id)["lease_until"]
    assert s.extend(job, 120)
    assert (db.row(job_id)["lease_until"] - before).total_seconds() > 100


def test_recover_returns_expired_leases_in_bounded_batches(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop", max_attempts=1 if i == 0 else 5)) for i in range(5)]
    claimed = s.claim(["default"], WORKER, 0.1, limit=5)
    live = s.enqueue(new_job("noop"))
    claim_one(s, lease=60)
    assert len(claimed) == 5
    db.sleep(0.2)
    assert s.recover_expired(limit=3) == 3
    assert s.recover_expired(limit=3) == 2
    assert s.recover_expired() == 0
    statuses = {job_id: db.row(job_id)["status"] for job_id in ids}
    assert statuses[ids[0]] == "dead"  # its only attempt was used
    assert all(statuses[job_id] == "ready" for job_id in ids[1:])
    assert db.row(ids[1])["last_error"] == "lease expired"
    assert db.row(live)["status"] == "reserved"


def test_retry_dead_resets_attempts(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop", queue="mail"))
    s.fail(claim_one(s, queues=("mail",)), "Boom", Decision(dead=True, delay=0))
    assert [row["id"] for row in s.dead_jobs()] == [job_id]
    assert "payload" not in s.dead_jobs()[0]
    assert s.retry_dead(queue="other") == 0
    assert s.retry_dead([job_id]) == 1
    row = db.row(job_id)
    assert row["status"] == "ready" and row["attempts"] == 0 and row["finished_at"] is None
    assert row["max_attempts"] == 5 and row["last_error"] == "Boom"


def test_retry_dead_can_set_max_attempts_and_keeps_the_history(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop", queue=queue, max_attempts=1)) for queue in ("a", "b", "b")]
    for job in s.claim(["a", "b"], WORKER, 30, limit=3):
        assert s.fail(job, f"Boom {job.id}", Decision(dead=True, delay=0))
    assert s.retry_dead([ids[0]], max_attempts=4) == 1
    assert s.retry_dead(queue="b", max_attempts=7) == 2
    rows = [db.row(job_id) for job_id in ids]
    assert [(row["status"], row["max_attempts"]) for row in rows] == \
        [("ready", 4), ("ready", 7), ("ready", 7)]
    assert [json.loads(row["error_history"])[0]["error"] for row in rows] == \
        [f"Boom {job_id}" for job_id in ids]


def fill_queues_for_plans(s):
    """Enough rows in every state that a bad plan would show."""
    s.enqueue_many([new_job("noop", queue=f"q{i % 7}", priority=i % 3) for i in range(3000)])
    s.claim([f"q{i}" for i in range(7)], WORKER, 30, limit=50)


@pytest.mark.parametrize("query,args,index", [
    # the claim's locking read, as the claim script runs it
    (mysql_queries.LOCK_NEXT_READY.format(levels=levels(3)), ("q1", 0, 1, 2, "q1", 10),
     "ix_prefork_jobs_claim"),
    (mysql_queries.LOCK_EXPIRED, (100,), "ix_prefork_jobs_lease"),
    # a group completion's locking read: primary-key lookups, not a scan
    (mysql_queries.LOCK_LEASED_GROUP.format(lease_pairs=mysql_queries.lease_pairs(2)),
     (5, "a" * 32, 9, "b" * 32), "PRIMARY"),
], ids=["claim", "recovery", "group completion"])
def test_mysql_queue_queries_read_an_index_range_in_order(store, clean_db, query, args, index):
    s = store()
    fill_queues_for_plans(s)
    s.set_paused("q2", True)   # the paused-queue check has a row to look at
    clean_db.cursor().execute("ANALYZE TABLE prefork_jobs")
    with clean_db.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("EXPLAIN " + query, args)
        plan = cursor.fetchall()
    jobs_rows = [row for row in plan if row["table"] == "prefork_jobs"]
    assert len(jobs_rows) == 1, plan
    # The paused-queue check is one primary-key lookup (a const table: the
    # optimizer reads that one row up front), never a scan; the claim's derived
    # table of next jobs is what the jobs row fills.
    assert all((row["table"] == "prefork_queue_states" and row["key"] == "PRIMARY")
               or "no matching row in const table" in (row["Extra"] or "")
               or row["table"].startswith("<derived")
               for row in plan if row is not jobs_rows[0]), plan
    row = jobs_rows[0]
    assert row["key"] == index, row
    assert row["type"] in ("range", "ref"), row  # never ALL (a full scan) or index (full index)
    assert "filesort" not in (row["Extra"] or ""), row


@pytest.mark.parametrize("update", [mysql_queries.RESERVE_LOCKED,
                                    mysql_queries.COMPLETE_LOCKED_GROUP],
                         ids=["claim", "group completion"])
def test_mysql_joined_updates_go_by_the_primary_key(store, clean_db, update):
    s = store()
    # Few reserved rows among many: reading them through the lease index looks
    # cheaper to the optimizer than the JSON list (estimated at 40 rows).
    s.enqueue_many([new_job("noop") for _ in range(2000)])
    claimed = s.claim(["default"], WORKER, 30, limit=3)
    clean_db.cursor().execute("ANALYZE TABLE prefork_jobs")
    # The group completion's fence: two of the claimed leases (real ones, so that
    # the optimizer cannot rule the rows out when it reads them by key).
    fence = [value for job in claimed[:2] for value in job.lease]
    update = update.format(lease_pairs=mysql_queries.lease_pairs(2))
    ids = json.dumps([job.id for job in claimed[:2]])
    with clean_db.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("SET @prefork_claimed = '[5, 9]', @prefork_completed = %s", (ids,))
        cursor.execute("EXPLAIN " + update, fence if "lease_token = %s" in update else ["x"] * 4)
        plan = cursor.fetchall()
    jobs_row = next(row for row in plan if row["table"] == "j")
    assert jobs_row["key"] == "PRIMARY" and jobs_row["type"] in ("eq_ref", "range"), plan


def test_mysql_scripts_are_whole_named_statements():
    """A script sends named statements unchanged, in order: none is edited on the way."""
    q = mysql_queries
    assert q.COMPLETE_AND_CLAIM.split("; ") == [
        q.FORGET_BATCH_IDS, q.START_TRANSACTION, q.LOCK_LEASED_GROUP, q.COMPLETE_LOCKED_GROUP,
        q.LOCK_NEXT_READY, q.RESERVE_LOCKED, q.COMMIT, q.READ_BACK_CLAIMED, q.COMPLETED_IDS]


@pytest.mark.parametrize("query,index", [
    (sqlite_queries.CLAIM_SELECT, "ix_prefork_jobs_claim"),
    (sqlite_queries.EXPIRED, "ix_prefork_jobs_lease"),  # the read recovery runs
])
def test_sqlite_queue_queries_read_an_index_range_in_order(sqlite_store, sqlite_db, query, index):
    fill_queues_for_plans(sqlite_store())
    sqlite_db.execute("ANALYZE")
    params = {"queue": "q1", "now": "2999-01-01 00:00:00.000000", "limit": 100, "priority": 1}
    plan = [row[3] for row in sqlite_db.conn.execute("EXPLAIN QUERY PLAN " + query, params)]
    assert any(line.startswith("SEARCH prefork_jobs USING") and f"INDEX {index} (status=?"
               in line for line in plan), plan
    assert not any("TEMP B-TREE" in line for line in plan), plan  # no sort of the rows read
    assert not any(line.startswith("SCAN") for line in plan), plan  # no full scan


def test_invalid_jobs_are_refused_before_the_database(backend_store):
    for bad in [lambda: new_job("no spaces"), lambda: new_job("noop", queue="bad queue"),
                lambda: new_job("noop", [1, 2]), lambda: new_job("noop", "{oops"),
                lambda: new_job("noop", {"big": "x" * 70000}), lambda: new_job("noop", key=""),
                lambda: new_job("noop", delay=-1), lambda: new_job("noop", priority=40000)]:
        with pytest.raises(UserError):
            bad()


def test_extend_many_extends_only_live_leases_with_matching_tokens(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop")) for _ in range(3)]
    jobs = s.claim(["default"], WORKER, 1, limit=3)
    wrong_token = (jobs[2].id, "0" * 32)
    assert s.extend_many([(jobs[0].id, jobs[0].lease_token), (jobs[1].id, jobs[1].lease_token),
                          wrong_token], 300) == 2
    leases = [db.row(job_id)["lease_until"] for job_id in ids]
    assert (leases[0] - leases[2]).total_seconds() > 250
    # Done under its own lease (its completion won the race) is still ours;
    # done under another is not.
    assert s.complete(jobs[1])
    assert s.extend_many([(jobs[0].id, jobs[0].lease_token), (jobs[1].id, jobs[1].lease_token),
                          (jobs[1].id, "0" * 32)], 300) == 2


def test_hand_back_charges_a_crash_and_poisons_after_max_crashes(backend_store, db):
    from prefork.retry import RetryPolicy
    s = backend_store()
    job_id = s.enqueue(new_job("noop", max_attempts=10))
    policy = RetryPolicy(base=0.001, cap=0.001)
    for crash in (1, 2):
        job = claim_one(s)
        assert s.hand_back(job.id, job.lease_token, "SIGKILL", policy, 3) == "ready"
        row = db.row(job_id)
        assert row["crashes"] == crash and row["attempts"] == crash
        assert row["last_error"] == "worker died: SIGKILL"
        db.sleep(0.01)
    job = claim_one(s)
    assert s.hand_back(job.id, "f" * 32, "SIGSEGV", policy, 3) is None
    assert s.hand_back(job.id, job.lease_token, "SIGSEGV", policy, 3) == "dead"
    row = db.row(job_id)
    assert row["last_error"] == "crashed its worker 3 times: SIGSEGV"
    assert [(entry["attempt"], entry["error"]) for entry in json.loads(row["error_history"])] \
        == [(1, "worker died: SIGKILL"), (2, "worker died: SIGKILL"),
            (3, "crashed its worker 3 times: SIGSEGV")]


def test_hand_back_uncharged_restores_the_attempt(backend_store, db):
    from prefork.retry import RetryPolicy
    s = backend_store()
    job_id = s.enqueue(new_job("noop", max_attempts=1))
    job = claim_one(s)
    assert s.hand_back(job.id, job.lease_token, "graceful timeout", RetryPolicy(), 3,
                       charge=False) == "ready"
    row = db.row(job_id)
    assert row["attempts"] == 0 and row["crashes"] == 0 and row["status"] == "ready"
    assert row["error_history"] is None   # no attempt was used: none failed


def test_ready_count_counts_ready_jobs_of_each_queue_up_to_the_limit(backend_store):
    s = backend_store()
    s.enqueue_many([new_job("noop") for _ in range(3)] + [new_job("noop", queue="mail")] * 2)
    s.enqueue(new_job("noop", delay=3600))  # delayed: not ready
    claim_one(s)                             # reserved: not ready
    assert s.ready_count(["default"], 10) == 2
    assert s.ready_count(["default"], 1) == 1
    assert s.ready_count(["default", "mail"], 10) == 4
    assert s.ready_count(["other"], 10) == 0


def test_complete_and_claim_finishes_one_job_and_reserves_the_next(backend_store, db):
    s = backend_store()
    first = s.enqueue(new_job("noop", queue="high"))
    second = s.enqueue(new_job("noop", queue="low"))
    job = claim_one(s, queues=("high", "low"))
    completed, (next_job,) = s.complete_and_claim(leases(job), ["high", "low"], WORKER, 30)
    assert completed == {first} and next_job.id == second and next_job.attempt == 1
    assert db.row(first)["status"] == "done"
    row = db.row(second)
    assert row["status"] == "reserved" and row["lease_token"] == next_job.lease_token
    completed, after_last = s.complete_and_claim(leases(next_job), ["high", "low"], WORKER, 30)
    assert completed == {second} and after_last == []


def test_complete_and_claim_with_a_lost_lease_completes_nothing(backend_store, db):
    s = backend_store()
    job_id = s.enqueue(new_job("noop"))
    stale = claim_one(s, lease=0.1)
    db.sleep(0.2)
    completed, next_jobs = s.complete_and_claim(leases(stale), ["default"], WORKER, 30)
    assert completed == set() and next_jobs == []
    assert db.row(job_id)["status"] == "reserved"


def test_a_queue_listed_twice_is_read_once(backend_store):
    s = backend_store()
    ids = [s.enqueue(new_job("noop", queue="q1")) for _ in range(2)]
    assert s.ready_count(["q1", "q1"], 10) == 2
    claimed = s.claim(["q1", "q1"], WORKER, 30, limit=5)
    assert sorted(job.id for job in claimed) == ids
    assert len({job.lease_token for job in claimed}) == 2


def test_a_batch_claim_gives_each_job_its_own_token_in_claim_order(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop", priority=p)) for p in (3, 1, 2, 0)]
    first = claim_one(s)
    assert first.id == ids[3]
    completed, batch = s.complete_and_claim(leases(first), ["default"], WORKER, 30, limit=5)
    assert completed == {first.id} and [job.id for job in batch] == [ids[1], ids[2], ids[0]]
    tokens = {job.lease_token for job in batch}
    assert len(tokens) == 3 and all(len(token) == 32 for token in tokens)
    for job in batch:
        row = db.row(job.id)
        assert (row["status"], row["lease_token"], row["attempts"], job.attempt) == \
            ("reserved", job.lease_token, 1, 1)
    # complete_and_claim wrote first's completion: writing it again changes nothing
    assert s.complete(batch[1]) and s.complete(first)


def leases(*jobs):
    return [(job.id, job.lease_token) for job in jobs]


def test_a_group_completion_writes_each_live_lease_and_names_the_lost(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop")) for _ in range(4)]
    first, second, third, fourth = s.claim(["default"], WORKER, 30, limit=4)
    forged = (third.id, "0" * 32)
    assert s.complete_many(leases(first, second) + [forged]) == {first.id, second.id}
    assert [db.row(job_id)["status"] for job_id in ids] == ["done", "done", "reserved", "reserved"]
    finished_at = db.row(ids[0])["finished_at"]
    assert finished_at is not None and db.row(ids[0])["lease_token"] == first.lease_token
    # Already written with this lease (the parent does so for a busy child):
    # completed, and not written again.
    db.sleep(0.01)
    assert s.complete_many(leases(first, second)) == {first.id, second.id}
    assert db.row(ids[0])["finished_at"] == finished_at
    assert s.complete_many([]) == set()


def test_a_group_completion_and_claim_writes_a_batch_and_takes_the_next(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop")) for _ in range(5)]
    batch = s.claim(["default"], WORKER, 30, limit=3)
    completed, following = s.complete_and_claim(leases(*batch), ["default"], WORKER, 30, limit=3)
    assert completed == set(ids[:3]) and [job.id for job in following] == ids[3:]
    assert [db.row(job_id)["status"] for job_id in ids] == ["done"] * 3 + ["reserved"] * 2


def test_a_group_completion_skips_an_expired_lease(backend_store, db):
    s = backend_store()
    s.enqueue(new_job("noop"))
    s.enqueue(new_job("noop"))
    stale = claim_one(s, lease=0.1)
    live = claim_one(s)
    db.sleep(0.2)
    assert s.complete_many(leases(stale, live)) == {live.id}
    assert db.row(stale.id)["status"] == "reserved"


def test_notify_on_an_application_connection_rings_the_stores_bell(backend_store, db):
    s = backend_store()
    bell = doorbell.Doorbell(s.bell_key)
    conn = db.app_connection()
    try:
        prefork.enqueue(conn, "noop", queue="mail")
        conn.commit()
        prefork.notify(conn, queue="mail", jobs=2)
        assert bell.rings() == {"mail": 2}
    finally:
        conn.close()
        bell.close()
