"""Test handlers. The ledger handler writes its effect in the completion transaction."""
import os
import time

import prefork

FAILURES_FILE = os.environ.get("LEDGER_FAILURES_FILE")


@prefork.handler("noop")
def noop(job):
    pass


@prefork.handler("ledger")
def ledger(job):
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)",
                       (job.idempotency_key, job.id))


@prefork.handler("flaky")
def flaky(job):
    """Fails with a transient error until its attempt reaches payload['succeed_on']."""
    if job.attempt < job.payload["succeed_on"]:
        raise ConnectionResetError("peer said: password=hunter2")
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)",
                       (job.idempotency_key, job.id))


@prefork.handler("permanent")
def permanent(job):
    raise prefork.PermanentError("card 4111-1111 declined")


@prefork.handler("sleep")
def sleep(job):
    time.sleep(float(job.payload.get("seconds", 1)))
