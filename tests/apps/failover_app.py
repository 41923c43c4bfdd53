"""The failover drill's handler (tests/ha/test_failover.py): each run appends its job id to
FAILOVER_RUNS_FILE (outside the database: a run the database forgot is still counted),
then holds its job a moment and writes its ledger row with its completion."""
import os
import time

import prefork


@prefork.handler("failover.ledger")
def ledger(job):
    with open(os.environ["FAILOVER_RUNS_FILE"], "a") as runs:
        runs.write(f"{job.id}\n")
    time.sleep(float(job.payload.get("seconds", 0.1)))
    with job.transaction() as cursor:
        cursor.execute("INSERT INTO ledger (job_id) VALUES (%s)", (job.id,))
