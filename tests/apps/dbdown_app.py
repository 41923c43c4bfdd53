"""Handlers for tests that take the database away while jobs run."""
import time

import prefork


@prefork.handler("dbdown.slow_ledger")
def slow_ledger(job):
    """Holds its job payload['seconds'], then writes its ledger row with the completion.
    Started just before the database stops, it is the job a dying child holds."""
    time.sleep(float(job.payload.get("seconds", 1)))
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO ledger (idempotency_key, job_id) VALUES (%s, %s)",
                       (job.idempotency_key, job.id))
