"""Every job's result (issue 29): what a plain handler returns is kept with its
completion, read back by Client.result() and prefork.result(), for result_ttl; a
result that is not JSON or too big fails the job with one line. Real supervisors
on SQLite and on MariaDB (both dialects), jobs completed every way the worker
completes them: one by one, in claim batches (the held jobs' completions written
together or by the parent), through job.transaction(), by children forked per job."""
import json

import pytest
from conftest import APPS as APPS_DIR
from conftest import run_cli, wait_until
from harness import supervisor_starter

import prefork
from prefork import Client
from prefork.errors import JobFailed, JobNotFinished, UserError
from prefork.jobs import new_job
from prefork.worker.loop import Worker

APP = ("--app", "results_app")


@pytest.fixture
def queue(backend, backend_store, queue_dsn):
    """(DSN, store) of the backend under test, on an empty queue."""
    return queue_dsn, backend_store()


@pytest.fixture
def supervisor(tmp_path, queue):
    with supervisor_starter(tmp_path, queue[0], *APP) as start:
        yield start


@pytest.fixture
def client(queue):
    with Client(queue[0]) as opened:
        yield opened


def add(store, job_type, payload=None, **options):
    return store.enqueue(new_job(job_type, payload or {}, **options))


def results_kept(db):
    """The results rows the queue holds (one per done job that returned something)."""
    return db.scalar("SELECT COUNT(*) FROM prefork_task_results WHERE return_value IS NOT NULL")


def test_what_a_plain_handler_returns_is_read_back_by_the_client(queue, supervisor, client):
    dsn, store = queue
    answer = add(store, "results.answer")
    nothing = add(store, "results.nothing")
    listed = add(store, "results.echo", {"value": [1, "two", {"three": 3.5}, None, True]})
    in_transaction = add(store, "results.in_transaction")
    supervisor("--workers", "2")

    assert client.result(answer, wait=60) == {"answer": 42, "job": answer}
    assert client.result(nothing, wait=60) is None
    assert client.result(listed, wait=60) == [1, "two", {"three": 3.5}, None, True]
    assert client.result(in_transaction, wait=60) == {"written": "with the completion"}
    kept = store.job_result(answer)
    assert kept.value == {"answer": 42, "job": answer} and kept.attempt == 1
    assert kept.expires_at is not None and kept.finished_at < kept.expires_at


def test_prefork_result_reads_through_the_configured_default_client(queue, supervisor,
                                                                   monkeypatch):
    dsn, store = queue
    job_id = add(store, "results.answer")
    supervisor("--workers", "1")
    monkeypatch.setenv("PREFORK_QUEUE_DSN", dsn)
    previous = prefork.client.set_default_client(None)
    try:
        assert prefork.result(job_id, wait=60) == {"answer": 42, "job": job_id}
    finally:
        prefork.client.set_default_client(previous)


def test_a_result_that_cannot_be_kept_fails_the_job_with_one_line(queue, supervisor, client):
    dsn, store = queue
    not_json = add(store, "results.not_json")
    too_big = add(store, "results.echo", {"size": 3000})
    fits = add(store, "results.echo", {"size": 2000})
    sup = supervisor("--workers", "1", "--max-result-bytes", "2500")
    assert client.result(fits, wait=60) == "x" * 2000
    for job_id, error in ((not_json, "return value is not JSON: TypeError"),
                          (too_big, "return value is 3002 bytes, over the limit of 2500 "
                                    "(max_result_bytes)")):
        with pytest.raises(JobFailed, match="is dead: " + error.replace("(", r"\(")
                           .replace(")", r"\)")):
            client.result(job_id, wait=60)
        row = store.get(job_id)
        assert (row["status"], row["attempts"], row["last_error"]) == ("dead", 1, error)
        assert store.job_result(job_id) is None
    assert sup.events("job_dead", job_id=too_big)[0]["error"] == row["last_error"]


def test_a_result_returned_after_its_own_transaction_is_not_kept_and_said_so(queue, supervisor,
                                                                           client):
    dsn, store = queue
    job_id = add(store, "results.after_transaction")
    sup = supervisor("--workers", "1")
    assert client.result(job_id, wait=60) is None
    assert store.get(job_id)["status"] == "done"
    sup.wait_event("job_result_not_kept", job_id=job_id)


@pytest.mark.parametrize("mode", [
    ("--claim-batch", "8"),          # batches: held jobs, their completions together
    ("--max-items", "1"),            # a child forked per job, handed its job by the parent
])
def test_every_done_job_has_its_result_however_its_completion_was_written(queue, db,
                                                                         supervisor, client,
                                                                         mode):
    dsn, store = queue
    ids = [add(store, "results.echo", {"value": {"n": n}}) for n in range(30)]
    ids += [add(store, "results.nothing") for _ in range(10)]
    slow = add(store, "results.sleepy", {"seconds": 1.5})   # holds up a batch's last write
    ids += [add(store, "results.echo", {"value": {"n": n}}) for n in range(30, 40)]
    supervisor("--workers", "2", *mode)
    assert client.result(slow, wait=120) == {"slept": 1.5}
    for n, job_id in enumerate(ids[:30] + ids[40:]):
        assert client.result(job_id, wait=120) == {"n": n}
    for job_id in ids[30:40]:
        assert client.result(job_id, wait=120) is None
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'") == 51
    assert results_kept(db) == 41


def test_a_result_expires_after_its_ttl_and_the_supervisor_clears_it(queue, db, supervisor,
                                                                    client):
    dsn, store = queue
    job_id = add(store, "results.answer")
    sup = supervisor("--workers", "1", "--result-ttl", "2", "--lease-seconds", "2")
    assert client.result(job_id, wait=60) == {"answer": 42, "job": job_id}
    # Never returned once expired, whether or not it is cleared yet.
    wait_until(lambda: client.result(job_id) is None, timeout=30, message="the result to expire")
    assert store.job_result(job_id) is None and store.get(job_id)["status"] == "done"
    sup.wait_event("results_expired", timeout=30)
    assert results_kept(db) == 0
    assert db.scalar("SELECT COUNT(*) FROM prefork_task_results WHERE job_id = %s", (job_id,)) == 1


def test_result_ttl_zero_keeps_no_result(queue, db, supervisor, client):
    dsn, store = queue
    job_id = add(store, "results.answer")
    supervisor("--workers", "1", "--result-ttl", "0")
    assert client.result(job_id, wait=60) is None
    assert db.scalar("SELECT COUNT(*) FROM prefork_task_results") == 0


def test_the_client_says_when_a_job_is_not_finished_or_not_there(queue, client):
    dsn, store = queue
    job_id = add(store, "results.answer")
    with pytest.raises(JobNotFinished, match=f"job {job_id} has not finished"):
        client.result(job_id)
    with pytest.raises(JobNotFinished, match="within 0.2s"):
        client.result(job_id, wait=0.2)
    with pytest.raises(UserError, match=f"no job {job_id + 1000}"):
        client.result(job_id + 1000)
    for wrong in ("7", 1.5, True):
        with pytest.raises(UserError, match="a job id is a whole number"):
            client.result(wrong)
    with pytest.raises(UserError, match="wait must be"):
        client.result(job_id, wait=-1)


def test_show_prints_a_done_jobs_result(queue, supervisor, client):
    dsn, store = queue
    job_id = add(store, "results.answer")
    supervisor("--workers", "1")
    client.result(job_id, wait=60)
    shown = run_cli("show", str(job_id), dsn=dsn)
    assert shown.returncode == 0, shown.stderr
    job = json.loads(shown.stdout)
    assert job["result"] == {"answer": 42, "job": job_id}
    assert job["result_expires_at"].endswith("+00:00")


# --- the no-op job's fast path: no statement for a result it does not have ---------------

@pytest.fixture
def results_app(monkeypatch):
    """The handlers of results_app, registered in this process (the worker runs here)."""
    monkeypatch.syspath_prepend(str(APPS_DIR))
    prefork.registry.import_apps(["results_app"])


def session_inserts(store):
    """How many INSERTs the store's own MySQL session has sent, by the server's count."""
    rows = store._all("SHOW SESSION STATUS WHERE Variable_name IN"
                      " ('Com_insert', 'Com_insert_select')")
    return sum(int(value) for _, value in rows)


def test_a_handler_that_returns_none_costs_no_statement(store, make_config, results_app):
    """The worker loop on a MySQL session, counted by the server: jobs whose handler
    returns None send no INSERT at all; those that return something one each (so the
    count is not blind)."""
    s = store()
    config = make_config(claim_batch="4")
    for job_type, inserts in (("results.nothing", 0), ("results.answer", 6)):
        for _ in range(6):
            add(s, job_type)
        before = session_inserts(s)
        assert Worker(s, config).run(stop_when_empty=True) == 6
        assert session_inserts(s) - before == inserts, job_type


def test_a_handler_that_returns_none_costs_no_statement_on_sqlite(sqlite_store,
                                                                 make_sqlite_config,
                                                                 results_app):
    s = sqlite_store()
    config = make_sqlite_config(claim_batch="4")
    for job_type, writes in (("results.nothing", 0), ("results.answer", 6)):
        for _ in range(6):
            add(s, job_type)
        statements = []
        s.conn.set_trace_callback(statements.append)
        assert Worker(s, config).run(stop_when_empty=True) == 6
        s.conn.set_trace_callback(None)
        assert sum("prefork_task_results" in sql for sql in statements) == writes, job_type
