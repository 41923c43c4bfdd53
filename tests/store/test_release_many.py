"""Store.release_many(): a worker gives back its held batch at once (after a slow
job, or as it stops), each job as release() gives back one, on both backends."""
from prefork.jobs import new_job

WORKER = "host:1"


def test_release_many_gives_back_the_claims_still_ours(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop")) for _ in range(4)]
    jobs = s.claim(["default"], WORKER, 30, limit=4)
    taken = jobs[1]
    assert s.release(taken)   # given back meanwhile (a hand-back would do the same)
    again = s.claim(["default"], WORKER, 30)[0]   # and claimed by someone else
    assert again.id == taken.id
    assert s.release_many(jobs) == {ids[0], ids[2], ids[3]}
    for job_id in (ids[0], ids[2], ids[3]):
        row = db.row(job_id)
        assert (row["status"], row["attempts"], row["lease_token"]) == ("ready", 0, None)
    assert db.row(taken.id)["status"] == "reserved"   # the other owner's, untouched
    assert s.release_many([]) == set()


def test_a_held_job_whose_cancellation_is_pending_ends_cancelled(backend_store, db):
    s = backend_store()
    ids = [s.enqueue(new_job("noop")) for _ in range(2)]
    jobs = s.claim(["default"], WORKER, 30, limit=2)
    s.cancel([ids[1]])
    assert s.release_many(jobs) == set(ids)
    assert [db.row(job_id)["status"] for job_id in ids] == ["ready", "cancelled"]
    assert db.row(ids[1])["finished_at"] is not None


def test_mysql_gives_back_a_batch_in_one_round_trip(store, clean_db, monkeypatch):
    s = store()
    ids = [s.enqueue(new_job("noop")) for _ in range(3)]
    jobs = s.claim(["default"], WORKER, 30, limit=3)
    sent = []
    query = s.conn.query
    monkeypatch.setattr(s.conn, "query", lambda sql, *args: sent.append(sql) or query(sql, *args))
    assert s.release_many(jobs) == set(ids)
    assert len([sql for sql in sent if "prefork_jobs" in str(sql)]) == 1
