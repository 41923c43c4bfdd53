"""Handlers for the results and failure tests (tests/worker/test_results.py,
tests/cli/test_show_outcomes.py, tests/dashboard/test_dashboard_job_page.py): what a
handler returns is kept with its completion; a failure keeps its traceback."""
import os

import prefork


@prefork.handler("results.answer")
def answer(job):
    return {"answer": 42, "job": job.id}


@prefork.handler("results.nothing")
def nothing(job):
    return None


@prefork.handler("results.echo")
def echo(job):
    """Returns what the payload says, e.g. a value too big or nested too deep."""
    if "size" in job.payload:
        return "x" * job.payload["size"]
    return job.payload.get("value")


@prefork.handler("results.not_json")
def not_json(job):
    return {"when": object()}


@prefork.handler("results.in_transaction")
def in_transaction(job):
    with job.transaction() as cursor:
        cursor.execute("SELECT 1")
        job.result = {"written": "with the completion"}


@prefork.handler("results.after_transaction")
def after_transaction(job):
    with job.transaction() as cursor:
        cursor.execute("SELECT 1")
    return {"too": "late"}


@prefork.handler("results.sleepy")
def sleepy(job):
    """Runs a while, then answers: a batch's first job with a result while the next
    ones are held."""
    import time
    time.sleep(job.payload.get("seconds", 0))
    return {"slept": job.payload.get("seconds", 0)}


@prefork.handler("results.capped", max_attempts=3, backoff=0)
def capped(job):
    """Fails every attempt with a message quoting the database password (masked in
    what is kept), three attempts at most whatever the job was enqueued with."""
    secret = os.environ.get("RESULTS_APP_SECRET", "")
    raise ConnectionError(f"attempt {job.attempt}: mysql://app:{secret}@db/x refused") \
        from KeyError("inner cause")
