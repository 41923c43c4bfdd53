"""Workflows in the store, on every backend (and both MySQL dialects): a chain's
steps, a group's callback and a batch's callbacks are released in the transaction
of the end that makes them due, once, on every path a job ends by (a completion
alone, in a group, with the next claim, in job.transaction(), written by the
parent; a failure, a hand-back, a lease expiry, a silent supervisor, a
cancellation); a dead member stops a chain or marks a group, and a retry resumes
it; everything is enqueued in the application's transaction like one job."""
from contextlib import closing

import pytest

import prefork
from prefork.errors import LeaseLost, UserError
from prefork.jobs import JobStatus, new_job
from prefork.retry import Decision, RetryPolicy
from prefork.workflows.model import State
from prefork.workflows.plan import plan_batch, plan_flow

WORKER = "flow-host:1"
job = prefork.job
DEAD = Decision(True, 0.0)


def enqueue(s, flow, key=None):
    return s.enqueue_workflow(plan_flow(flow), key)


def claim(s, limit=10, queues=("default",)):
    return s.claim(list(queues), WORKER, 60, limit=limit)


def types(jobs):
    return sorted(claimed.type for claimed in jobs)


def states(db, ids):
    return [db.row(job_id)["status"] for job_id in ids]


def run_all(s):
    """Claim and complete until nothing is ready; the types run, in order of claims."""
    ran = []
    while jobs := claim(s):
        ran.append(types(jobs))
        assert s.complete_many([claimed.lease for claimed in jobs]) == {j.id for j in jobs}
    return ran


def counters_agree(db, workflow_id):
    """A workflow's counters are its members' ends, as their rows say."""
    counted = db.scalar("SELECT CONCAT(done, '/', dead, '/', cancelled) FROM prefork_workflows"
                        " WHERE id = %s" if db.backend == "mysql" else
                        "SELECT done || '/' || dead || '/' || cancelled FROM prefork_workflows"
                        " WHERE id = %s", (workflow_id,))
    ended = [db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE workflow_id = %s"
                       " AND workflow_step >= 0 AND status = %s", (workflow_id, status))
             + db.scalar("SELECT COUNT(*) FROM prefork_workflows WHERE parent_id = %s"
                         " AND state = %s", (workflow_id, status))
             for status in ("done", "dead", "cancelled")]
    assert counted == "/".join(map(str, ended)), (workflow_id, counted, ended)


def test_a_chain_runs_its_steps_one_after_the_other(backend_store, db):
    s = backend_store()
    flow = prefork.chain(job("s.one"), job("s.two"), job("s.three"))
    enqueued = enqueue(s, flow)
    assert states(db, enqueued.job_ids) == ["ready", "waiting", "waiting"]
    assert run_all(s) == [["s.one"], ["s.two"], ["s.three"]]
    assert s.workflow_progress(enqueued.id)[2:6] == (State.DONE, 3, 3, 0)
    counters_agree(db, enqueued.id)


def test_a_groups_callback_starts_with_its_last_members_completion(backend_store, db):
    s = backend_store()
    enqueued = enqueue(s, prefork.group([job("g.a"), job("g.b"), job("g.c")],
                                        then=job("g.then")))
    *members, callback = enqueued.job_ids
    s.enqueue(new_job("plain"))
    first = claim(s, limit=2)
    assert s.complete_many([claimed.lease for claimed in first])
    assert db.row(callback)["status"] == "waiting"
    rest = claim(s)
    assert "g.then" not in types(rest)
    # The last members complete with a plain job and the next claim, in one call.
    done, taken = s.complete_and_claim([claimed.lease for claimed in rest], ["default"], WORKER,
                                       60, None, 5)
    assert done == {claimed.id for claimed in rest}
    assert types(taken) == ["g.then"]
    assert states(db, members) == ["done"] * 3
    counters_agree(db, enqueued.id)


def test_every_completion_path_moves_a_chain_on(backend_store, db):
    """Alone (complete), in job.transaction() with an effect, with the next claim, and
    written by the parent after the child (a repeated completion counts once)."""
    s = backend_store()
    enqueued = enqueue(s, prefork.chain(*[job(f"p.{n}") for n in range(5)]))
    [first] = claim(s)
    assert s.complete(first) and s.complete(first)   # done under its lease: no second end
    [second] = claim(s)
    with second.transaction() as cursor:
        cursor.execute(db.sql("INSERT INTO ledger VALUES (%s, %s)"), ("p.1", second.id))
    [third] = claim(s)
    done, [fourth] = s.complete_and_claim([third.lease], ["default"], WORKER, 60)
    assert done == {third.id} and fourth.type == "p.3"
    assert s.complete_many([fourth.lease]) == {fourth.id}
    assert s.complete_many([fourth.lease]) == {fourth.id}   # the parent writes it again
    [fifth] = claim(s)
    assert fifth.type == "p.4" and s.complete(fifth)
    assert s.workflow_progress(enqueued.id)[2:4] == (State.DONE, 5)
    assert db.scalar("SELECT COUNT(*) FROM ledger") == 1
    counters_agree(db, enqueued.id)


def test_a_lost_lease_moves_nothing(backend_store, db):
    s = backend_store()
    enqueued = enqueue(s, prefork.chain(job("l.one"), job("l.two")))
    [stale] = s.claim(["default"], WORKER, 0.05)
    db.sleep(0.1)
    assert s.recover_expired() == 1
    with pytest.raises(LeaseLost):
        with stale.transaction():
            pass
    assert not s.complete(stale)
    assert states(db, enqueued.job_ids) == ["ready", "waiting"]
    counters_agree(db, enqueued.id)


@pytest.mark.parametrize("on_dead", ["wait", "cancel"])
def test_a_dead_step_stops_a_chain_and_its_retry_resumes_it(backend_store, db, on_dead):
    s = backend_store()
    flow = prefork.chain(job("d.one"), job("d.two"),
                         prefork.group([job("d.g1"), job("d.g2")]), job("d.four"),
                         on_dead=on_dead)
    enqueued = enqueue(s, flow)
    two = enqueued.job_ids[1]
    [first] = claim(s)
    assert s.complete(first)
    [second] = claim(s)
    assert s.fail(second, "Boom", DEAD)
    later = "waiting" if on_dead == "wait" else "cancelled"
    assert states(db, enqueued.job_ids) == ["done", "dead", later, later, later]
    progress = s.workflow_progress(enqueued.id)
    assert (progress.state, progress.done, progress.dead, progress.cancelled) == (
        State.DEAD, 1, 1, 0 if on_dead == "wait" else 2)
    counters_agree(db, enqueued.id)
    assert claim(s) == []
    assert s.retry_dead([two]) == 1
    assert states(db, enqueued.job_ids) == ["done", "ready", "waiting", "waiting", "waiting"]
    assert s.workflow_progress(enqueued.id).state is State.RUNNING
    assert run_all(s) == [["d.two"], ["d.g1", "d.g2"], ["d.four"]]
    assert s.workflow_progress(enqueued.id)[2:7] == (State.DONE, 4, 4, 0, 0)
    counters_agree(db, enqueued.id)


def test_a_group_that_waits_for_every_member_done_and_one_for_every_end(backend_store, db):
    s = backend_store()
    strict = enqueue(s, prefork.group([job("w.a"), job("w.b")], then=job("w.strict")))
    lenient = enqueue(s, prefork.group([job("w.c"), job("w.d")], then=job("w.lenient"),
                                       policy="ended"))
    for claimed in claim(s):
        if claimed.type in ("w.a", "w.c"):
            assert s.fail(claimed, "Boom", DEAD)
        else:
            assert s.complete(claimed)
    assert types(claim(s)) == ["w.lenient"]
    assert db.row(strict.job_ids[-1])["status"] == "waiting"
    assert s.workflow_progress(strict.id).state is State.DEAD
    # The strict group's dead member, retried and done: its callback starts, once.
    assert s.retry_dead([strict.job_ids[0]]) == 1
    [again] = claim(s)
    assert again.type == "w.a" and s.complete(again)
    assert types(claim(s)) == ["w.strict"]
    # The lenient one's callback ran already: its member's retry starts nothing more.
    assert s.retry_dead([lenient.job_ids[0]]) == 1
    [member] = claim(s)
    assert member.type == "w.c" and s.complete(member)
    assert claim(s) == []
    for workflow in (strict, lenient):
        counters_agree(db, workflow.id)


def test_nesting_a_group_of_chains_then_a_callback(backend_store, db):
    s = backend_store()
    flow = prefork.chain(
        job("n.first"),
        prefork.group([prefork.chain(job("n.a1"), job("n.a2")),
                       prefork.chain(job("n.b1"), prefork.group([job("n.b2"), job("n.b3")]))],
                      then=job("n.then")),
        job("n.last"))
    enqueued = enqueue(s, flow)
    assert run_all(s) == [["n.first"], ["n.a1", "n.b1"], ["n.a2", "n.b2", "n.b3"], ["n.then"],
                          ["n.last"]]
    assert s.workflow_progress(enqueued.id).state is State.DONE
    assert db.scalar("SELECT COUNT(*) FROM prefork_workflows WHERE state <> 'done'") == 0


def test_every_way_a_member_dies_or_is_cancelled_is_counted(backend_store, db):
    """The ended policy's callback starts after members that ended every other way:
    out of attempts at hand-back, lease expiry, a silent supervisor's return, stopped
    by their cancellation (finished, or released with it pending), cancelled waiting
    or ready."""
    s = backend_store()
    process = s.register_process("h", 1, ["default"], 1, "t")
    members = [job(f"e.{n}", max_attempts=1) for n in range(7)]
    enqueued = enqueue(s, prefork.group(members, then=job("e.then"), policy="ended"))
    ids = enqueued.job_ids
    assert s.cancel([ids[6]]).cancelled == [ids[6]]
    jobs = {claimed.type: claimed for claimed in s.claim(["default"], WORKER, 60, 6, process)}
    assert s.hand_back(ids[0], jobs["e.0"].lease_token, "SIGKILL", RetryPolicy(), 3) is \
        JobStatus.DEAD
    db.execute("UPDATE prefork_jobs SET lease_until = %s WHERE id = %s",
               (db.row(ids[0])["created_at"], ids[1]))
    assert s.recover_expired() == 1
    s.cancel([ids[2], ids[3]])
    assert s.finish_cancelled(jobs["e.2"].lease)
    assert s.release(jobs["e.3"])
    db.execute("UPDATE prefork_processes SET heartbeat_at = %s WHERE id = %s",
               (db.row(ids[0])["created_at"], process))
    assert db.row(ids[-1])["status"] == "waiting"
    assert s.prune_silent(0.0) == [(process, 2)]
    assert states(db, ids) == ["dead", "dead", "cancelled", "cancelled", "dead", "dead",
                               "cancelled", "ready"]
    assert s.workflow_progress(enqueued.id)[2:] == (State.RUNNING, 2, 1, 0, 0, False)
    counters_agree(db, db.scalar("SELECT id FROM prefork_workflows WHERE kind = 'group'"))


def test_a_waiting_step_cancelled_stops_its_chain_when_reached(backend_store, db):
    s = backend_store()
    enqueued = enqueue(s, prefork.chain(job("c.one"), job("c.two"), job("c.three")))
    report = s.cancel([enqueued.job_ids[1]])
    assert report.cancelled == [enqueued.job_ids[1]]
    assert run_all(s) == [["c.one"]]
    assert states(db, enqueued.job_ids) == ["done", "cancelled", "waiting"]
    assert s.workflow_progress(enqueued.id)[2:6] == (State.CANCELLED, 3, 1, 0)
    assert s.retry_dead([enqueued.job_ids[1]], statuses=(JobStatus.CANCELLED,)) == 1
    assert run_all(s) == [["c.two"], ["c.three"]]
    counters_agree(db, enqueued.id)


def test_a_batch_takes_members_until_closed_then_its_callbacks_run_once(backend_store, db):
    s = backend_store()
    plan = plan_batch(job("b.success"), job("b.complete"))
    batch = s.enqueue_workflow(plan).id
    first = s.add_to_batch(batch, [job("b.1"), job("b.2")])
    assert run_all(s) == [["b.1", "b.2"]]
    assert s.workflow_progress(batch)[3:] == (2, 2, 0, 0, True)   # open: no callback yet
    [third] = s.add_to_batch(batch, [job("b.3")])
    [member] = claim(s)
    assert s.fail(member, "Boom", DEAD)
    s.close_batch(batch)
    assert types(claim(s)) == ["b.complete"]   # every member ended, not every one done
    with pytest.raises(UserError, match="closed"):
        s.add_to_batch(batch, [job("b.late")])
    assert s.retry_dead([third]) == 1
    assert run_all(s) == [["b.3"], ["b.success"]]
    progress = s.workflow_progress(batch)
    assert (progress.total, progress.done, progress.pending, progress.state) == (
        3, 3, 0, State.DONE)
    assert len(first) == 2 and db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 5


def test_an_empty_batch_closed_runs_both_callbacks(backend_store):
    s = backend_store()
    batch = s.enqueue_workflow(plan_batch(job("e.success"), job("e.complete"))).id
    s.close_batch(batch)
    assert types(claim(s)) == ["e.complete", "e.success"]


def test_a_workflow_is_enqueued_in_the_applications_transaction(backend_store, db):
    s = backend_store()
    flow = prefork.group([job("a.one"), job("a.two")], then=job("a.then"))
    with closing(db.app_connection()) as conn:
        prefork.enqueue_workflow(conn, flow)
        conn.rollback()
        enqueued = prefork.enqueue_workflow(conn, flow, key="order-7")
        batch = prefork.open_batch(conn, on_complete=job("a.done"))
        batch.add(conn, job("a.member"))
        batch.close(conn)
        conn.commit()
        assert prefork.enqueue_workflow(conn, flow, key="order-7") == enqueued
        assert prefork.workflow_progress(conn, batch.id).total == 1
        conn.commit()
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs") == 5
    assert run_all(s) == [["a.member", "a.one", "a.two"], ["a.done", "a.then"]]


def test_bad_workflows_are_refused_in_one_line(backend_store):
    for bad, words in [(lambda: prefork.chain(), "at least one step"),
                       (lambda: prefork.group([]), "at least one member"),
                       (lambda: prefork.group([job("x")], policy="some"), "policy must be"),
                       (lambda: prefork.chain(job("x"), "y"), "prefork.job()"),
                       (lambda: prefork.chain(job("x"), on_dead="retry"), "on_dead must be")]:
        with pytest.raises(UserError, match=words):
            bad()
    s = backend_store()
    with pytest.raises(UserError, match="no batch"):
        s.add_to_batch(999, [job("x")])
