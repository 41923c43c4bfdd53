"""Concurrency and rate limits through the Store API (issue 16), on every backend:
SQLite (`-k sqlite`) and MySQL (both dialects where conftest.DIALECT_MODULES
names this module). The supervisors and workers that use them are
test_limits_supervisor.py's.

A slot is a reserved job: each way a job leaves `reserved` frees its slot, and
nothing else does. Time is never waited for: a rate's bucket is moved into the
past through the database, and the store refills it by its own clock.
"""
import threading

import pytest
from leaving_reserved import LONG_AGO, at
from leaving_reserved import WAYS_OUT as SHARED_WAYS_OUT

from prefork.jobs import new_job
from prefork.limits.rules import NO_KEY, LimitRule, LimitUsage, Rate
from prefork.retry import RetryPolicy

WORKER = "limits-host:1"
REPORT = LimitRule("report", concurrency=2)


def claim(store, limit=10, rules=(REPORT,), queues=("default",), lease=30.0, process_id=None):
    return store.claim_limited(list(queues), WORKER, lease, limit, process_id,
                               {rule.job_type: rule for rule in rules})


def limited(store, *rules, handled=None):
    """A store with these rules published (and these handled types, default theirs)."""
    store.publish_limits(list(rules), handled or [rule.job_type for rule in rules])
    return store


def running(db, job_type="report"):
    return db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE status = 'reserved'"
                     " AND job_type = %s", (job_type,))


def test_enqueue_stores_the_key_and_flags_jobs_of_a_limited_type(backend_store, db):
    s = limited(backend_store(), REPORT)
    keyed = s.enqueue(new_job("report", concurrency_key="account-7"))
    plain = s.enqueue(new_job("mail"))
    s.enqueue_many([new_job("report", key="k1"), new_job("mail", key="k2",
                                                          concurrency_key="x")])
    rows = {job_id: s.get(job_id) for job_id in (keyed, plain)}
    assert (rows[keyed]["concurrency_key"], rows[keyed]["limited"]) == ("account-7", 1)
    assert (rows[plain]["concurrency_key"], rows[plain]["limited"]) == (NO_KEY, 0)
    assert rows[keyed]["cancel_requested_at"] is None
    flags = dict((key, (flag, group)) for key, flag, group in _all(
        db, "SELECT idempotency_key, limited, concurrency_key FROM prefork_jobs"
            " WHERE idempotency_key IS NOT NULL"))
    assert flags == {"k1": (1, NO_KEY), "k2": (0, "x")}


def _all(db, sql):
    if db.backend == "sqlite":
        return db.conn.execute(sql).fetchall()
    with db.conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def test_over_limit_jobs_stay_ready_unspent_and_other_types_keep_flowing(backend_store, db):
    s = limited(backend_store(), LimitRule("report", concurrency=1))
    reports = [s.enqueue(new_job("report")) for _ in range(3)]
    mails = [s.enqueue(new_job("mail")) for _ in range(2)]
    assert (s.ready_count(["default"], 10), s.limited_ready(["default"], 10)) == (2, 3)
    assert s.limited_ready(["default"], 2) == 2   # counted up to the limit
    first, _ = claim(s, rules=[LimitRule("report", concurrency=1)])
    assert [job.id for job in first] == reports[:1] and first[0].attempt == 1
    for _ in range(3):
        again, retry_after = claim(s, rules=[LimitRule("report", concurrency=1)])
        assert (again, retry_after) == ([], None)   # full: wait to be woken, not polled
    assert [(db.row(i)["status"], db.row(i)["attempts"]) for i in reports[1:]] == \
        [("ready", 0)] * 2
    # The plain claim takes the other types' jobs and never a limited one.
    assert sorted(job.id for job in s.claim(["default"], WORKER, 30, limit=10)) == mails
    assert s.limited_ready(["default"], 10) == 2   # due, whether or not they have room


def test_a_limit_of_two_never_lets_a_third_start_among_several_claimers(backend_store, db):
    """Rounds of four stores claiming at once (threads released together), each
    round after one running job finished: exactly the freed slot is taken, the
    running jobs never exceed two, and every job runs in the end."""
    s = limited(backend_store(), REPORT)
    ids = {s.enqueue(new_job("report", {"n": n})) for n in range(9)}
    stores = [backend_store() for _ in range(4)]
    held: list = []
    finished: set[int] = set()
    while finished != ids:
        claimed = claim_together(stores, limit=3)
        assert len(claimed) == min(2 - len(held), len(ids) - len(finished) - len(held)), claimed
        held += claimed
        assert running(db) == len(held) <= 2
        job = held.pop(0)   # one of them finishes: one slot frees
        assert s.complete(job)
        finished.add(job.id)


def claim_together(stores, **claim_args):
    """Each store claims once, all released at the same moment: the jobs claimed."""
    barrier = threading.Barrier(len(stores))
    claimed: list = []

    def claimer(store):
        barrier.wait(30)
        claimed.extend(claim(store, **claim_args)[0])
    threads = [threading.Thread(target=claimer, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len({job.id for job in claimed}) == len(claimed), "a job claimed twice"
    return claimed


# Every way a job leaves `reserved` (store, db, job, its supervisor's id).
WAYS_OUT = {
    "complete": lambda s, db, job, _: s.complete(job),
    **SHARED_WAYS_OUT,
    "hand back": lambda s, db, job, _: s.hand_back(job.id, job.lease_token, "SIGKILL",
                                                   RetryPolicy(), 3),
}


@pytest.mark.parametrize("way_out", list(WAYS_OUT))
def test_a_slot_frees_whichever_way_its_job_leaves_reserved(backend_store, db, way_out):
    one = LimitRule("report", concurrency=1)
    s = limited(backend_store(), one)
    process_id = s.register_process("limits-host", 1, ["default"], 1, "test")
    ids = [s.enqueue(new_job("report")) for _ in range(2)]
    [job], _ = claim(s, rules=[one], process_id=process_id)
    assert claim(s, rules=[one], process_id=process_id) == ([], None)
    assert WAYS_OUT[way_out](s, db, job, process_id)
    assert running(db) == 0
    [after], _ = claim(s, rules=[one], process_id=process_id)
    assert after.id in ids and running(db) == 1


def test_keys_are_independent_and_jobs_without_a_key_share_one_group(backend_store):
    one = LimitRule("report", concurrency=1)
    s = limited(backend_store(), one)
    a = [s.enqueue(new_job("report", concurrency_key="a")) for _ in range(2)]
    b = s.enqueue(new_job("report", concurrency_key="b"))
    bare = [s.enqueue(new_job("report")) for _ in range(2)]
    jobs, _ = claim(s, rules=[one])
    assert sorted(job.id for job in jobs) == [a[0], b, bare[0]]
    assert claim(s, rules=[one]) == ([], None)


def test_a_busy_key_with_a_long_backlog_hides_no_other_key(backend_store):
    """Hundreds of jobs of a full group ahead in claim order (more than a claim
    reads at once): the job of another key behind them still starts."""
    one = LimitRule("report", concurrency=1)
    s = limited(backend_store(), one)
    s.enqueue_many([new_job("report", concurrency_key="busy", priority=-1)
                    for _ in range(600)])
    [busy], _ = claim(s, rules=[one], limit=1)
    other = s.enqueue(new_job("report", concurrency_key="quiet"))
    jobs, _ = claim(s, rules=[one])
    assert [job.id for job in jobs] == [other]
    assert busy.id != other


def test_a_key_whose_rate_is_spent_hides_no_other_key_behind_its_backlog(backend_store):
    hourly = LimitRule("call", rate=Rate(1, 3600))
    s = limited(backend_store(), hourly)
    s.enqueue_many([new_job("call", concurrency_key="busy", priority=-1) for _ in range(600)])
    [busy], _ = claim(s, rules=[hourly], limit=1)
    assert s.complete(busy)   # its slot is free, its hour's token spent
    other = s.enqueue(new_job("call", concurrency_key="quiet"))
    jobs, retry_after = claim(s, rules=[hourly])
    assert [job.id for job in jobs] == [other]
    assert 3500 < retry_after <= 3600   # the busy key's next token


def test_a_rate_is_a_token_bucket_on_the_databases_clock(backend_store, db):
    """3/h: a new group starts one job (its first token), then waits 20 minutes a
    token; an hour later (moved back, not waited for) its bucket holds three."""
    rate = LimitRule("call", rate=Rate(3, 3600))
    s = limited(backend_store(), rate)
    ids = [s.enqueue(new_job("call")) for _ in range(5)]
    jobs, retry_after = claim(s, rules=[rate])
    assert [job.id for job in jobs] == ids[:1]
    assert retry_after == pytest.approx(1200, abs=5)
    assert s.complete(jobs[0])   # a rate is not a concurrency: finishing frees nothing
    jobs, retry_after = claim(s, rules=[rate])
    assert jobs == [] and 1000 < retry_after <= 1200
    db.execute("UPDATE prefork_limit_groups SET refilled_at = %s", (at(db, LONG_AGO),))
    jobs, retry_after = claim(s, rules=[rate])
    assert [job.id for job in jobs] == ids[1:4]
    assert retry_after == pytest.approx(1200, abs=5)
    assert db.scalar("SELECT tokens FROM prefork_limit_groups") == pytest.approx(0, abs=0.01)


def test_a_rate_of_one_an_hour_starts_one_job_among_several_claimers(backend_store, db):
    rate = LimitRule("call", rate=Rate(1, 3600))
    s = limited(backend_store(), rate)
    for _ in range(6):
        s.enqueue(new_job("call"))
    stores = [backend_store() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    claimed: list = []

    def claimer(store):
        barrier.wait(30)
        for _ in range(3):
            claimed.extend(claim(store, rules=[rate])[0])
    threads = [threading.Thread(target=claimer, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(claimed) == 1 and running(db, "call") == 1


def test_publishing_flags_the_live_jobs_of_a_new_limit_and_unflags_a_removed_ones(
        backend_store, db):
    s = backend_store()
    ready = [s.enqueue(new_job("report")) for _ in range(3)]
    other = s.enqueue(new_job("mail", queue="other"))
    held = s.claim(["default"], WORKER, 30)[0]   # running before the limit existed
    limited(s, REPORT, handled=["report", "mail"])
    assert [db.row(job_id)["limited"] for job_id in ready] == [1, 1, 1]
    assert db.row(other)["limited"] == 0
    assert s.ready_count(["default"], 10) == 0 and s.limited_ready(["default"], 10) == 2
    # The running job counts against the limit: one more may start, not two.
    assert len(claim(s)[0]) == 1
    s.publish_limits([], ["report"])
    assert db.scalar("SELECT COUNT(*) FROM prefork_limits") == 0
    assert db.row(ready[2])["limited"] == 0 and db.row(held.id)["limited"] == 0
    assert [job.id for job in s.claim(["default"], WORKER, 30)] == [ready[2]]


def test_publishing_replaces_a_rule_and_keeps_those_of_other_supervisors(backend_store, db):
    s = limited(backend_store(), REPORT, LimitRule("call", rate=Rate(5, 60)))
    s.publish_limits([LimitRule("report", concurrency=4)], ["report"])
    rows = sorted(_all(db, "SELECT job_type, concurrency, rate_count, rate_seconds"
                           " FROM prefork_limits"))
    assert [tuple(row) for row in rows] == [("call", None, 5, 60), ("report", 4, None, None)]


def test_limit_usage_shows_each_group_running_and_waiting(backend_store):
    rules = [REPORT, LimitRule("call", rate=Rate(100, 60))]
    s = limited(backend_store(), *rules)
    for key in ("a", "a", "a", "b"):
        s.enqueue(new_job("report", concurrency_key=key))
    s.enqueue(new_job("call", delay=3600))   # delayed: neither running nor waiting
    s.enqueue(new_job("mail"))               # no rule
    claim(s, rules=rules, limit=1)
    assert s.limit_usage() == [
        LimitUsage("report", "a", 1, 2, 2, None),
        LimitUsage("report", "b", 0, 1, 2, None)]


def test_a_paused_queue_starts_no_limited_job(backend_store):
    s = limited(backend_store(), REPORT)
    s.enqueue(new_job("report", queue="slow"))
    s.set_paused("slow", True)
    assert claim(s, queues=["slow"]) == ([], None)
    assert s.limited_ready(["slow"], 10) == 0
    s.set_paused("slow", False)
    assert len(claim(s, queues=["slow"])[0]) == 1


def test_queues_are_tried_in_order_and_groups_span_queues(backend_store):
    one = LimitRule("report", concurrency=1)
    s = limited(backend_store(), one)
    first = s.enqueue(new_job("report", queue="b", concurrency_key="k"))
    s.enqueue(new_job("report", queue="a", concurrency_key="k"))
    jobs, _ = claim(s, rules=[one], queues=["b", "a"])
    assert [job.id for job in jobs] == [first]   # one slot for the group in both queues


def test_prune_removes_groups_unused_that_long(backend_store, db):
    s = limited(backend_store(), REPORT)
    s.enqueue(new_job("report", concurrency_key="old"))
    s.enqueue(new_job("report", concurrency_key="new"))
    claim(s)
    db.execute("UPDATE prefork_limit_groups SET refilled_at = %s WHERE concurrency_key = 'old'",
               (at(db, LONG_AGO),))
    assert s.prune_processes(3600) == 1
    assert db.scalar("SELECT COUNT(*) FROM prefork_limit_groups") == 1
    # Its running job still holds its slot: the group's row is made anew.
    s.enqueue_many([new_job("report", concurrency_key="old") for _ in range(2)])
    assert len(claim(s)[0]) == 1
    assert db.scalar("SELECT COUNT(*) FROM prefork_limit_groups") == 2
