"""Workflows run by the real supervisor, on every backend: a chain passes each step's
result to the next, a group's callback gets its members', claimed in batches and
with a child forked per job (whose completions the parent writes for jobs without
a result); a callback whose child is SIGKILLed runs again and still once.
tests/apps/flows_app.py's handlers; the soak (tests/workflows_chaos.py) does this
under chaos."""
import os
import signal
from contextlib import closing

import pytest
from conftest import wait_until
from harness import supervisor_starter

import prefork

APPS = ("--app", "flows_app", "--log-format", "json")


def summing_flow():
    add = prefork.job
    return prefork.chain(
        add("flow.sum", {"n": 1}), add("flow.sum", {"n": 10}),
        prefork.group([add("flow.sum", {"n": 100}),
                       prefork.chain(add("flow.sum", {"n": 1000}), add("flow.sum", {"n": 5}))],
                      then=add("flow.sum", {"n": 0})))


@pytest.mark.parametrize("max_items", [0, 1], ids=["pool", "fork-per-job"])
def test_a_chain_passes_its_results_on_to_the_callback(backend, db, queue_dsn, tmp_path,
                                                       max_items):
    with closing(db.app_connection()) as conn:
        enqueued = prefork.enqueue_workflow(conn, summing_flow(), key="sums")
        conn.commit()
    first, second, member, nested_first, nested_last, callback = enqueued.job_ids
    extra = ("--max-items", "1") if max_items else ()
    with supervisor_starter(tmp_path, queue_dsn, *APPS, "--workers", "3", *extra) as start, \
            prefork.Client(queue_dsn) as client:
        start()
        assert client.result(callback, wait=60) == 0 + 111 + (1011 + 5)
        assert [client.result(job_id) for job_id in (first, second, member, nested_last)] == [
            1, 11, 111, 1016]
        progress = client.workflow_progress(enqueued.id)
        assert (progress.state, progress.done, progress.total) == ("done", 3, 3)


LEDGER = ("CREATE TABLE flow_ledger (job_id BIGINT NOT NULL PRIMARY KEY, run_id VARCHAR(64)"
          " NOT NULL, workflow VARCHAR(64) NOT NULL, role VARCHAR(16) NOT NULL, started_at"
          " DOUBLE NOT NULL, committed_at DOUBLE NOT NULL, upstream TEXT NOT NULL,"
          " pid INT NOT NULL)")


def test_a_killed_callback_runs_again_and_writes_its_effect_once(backend, db, queue_dsn,
                                                                 tmp_path):
    db.execute("DROP TABLE IF EXISTS flow_ledger")
    db.execute(LEDGER)
    step = {"run": "r", "workflow": "w"}
    flow = prefork.group([prefork.job("flow.quick", {"role": "member"}) for _ in range(4)],
                         then=prefork.job("flow.step", {**step, "role": "callback",
                                                        "work_ms": 1500}))
    with closing(db.app_connection()) as conn:
        enqueued = prefork.enqueue_workflow(conn, flow)
        conn.commit()
    callback = enqueued.job_ids[-1]
    with supervisor_starter(tmp_path, queue_dsn, *APPS, "--workers", "2") as start:
        sup = start()
        claimed = sup.wait_event("job_claimed", job_id=callback, timeout=60)[0]
        os.kill(claimed["pid"], signal.SIGKILL)
        wait_until(lambda: db.row(callback)["status"] == "done", timeout=60,
                   message="the callback run again to its end")
        assert len(sup.events("job_claimed", job_id=callback)) == 2
    assert db.row(callback)["crashes"] == 1
    assert db.scalar("SELECT COUNT(*) FROM flow_ledger WHERE job_id = %s", (callback,)) == 1
    with prefork.Client(queue_dsn) as client:
        progress = client.workflow_progress(enqueued.id)
    assert (progress.state, progress.done, progress.total) == ("done", 2, 2)
