"""Handlers for the workflow soak (tests/workflows_chaos.py) and the supervised
workflow tests (tests/supervisor/test_workflows_supervisor.py).

Every run first reads the jobs before it in its workflow (job.upstream()) and
appends one line to the execution log (CHAOS_EXEC_LOG, O_APPEND: lines of
concurrent children never mix): "TIME PID JOB ATTEMPT ROLE ok|early" (early: a job
before it had not ended yet when it started: it ran before its last member's end).

`flow.step` then works payload['work_ms'], fails its first attempt when
payload['flaky'], fails for good when payload['doomed'], and writes its ledger
row (tests/workflows_chaos.py makes the table) in the transaction that marks it
done: its start time, its commit's (about), and the ids of the jobs before it that
were done. `flow.quick` writes nothing: its completion is
written by its worker (with its batch's, or by its supervisor for a busy or dead
child).
"""
import json
import os
import time

import prefork

EXEC_LOG = os.environ.get("CHAOS_EXEC_LOG")

LEDGER_INSERT = ("INSERT INTO flow_ledger (job_id, run_id, workflow, role, started_at,"
                 " committed_at, upstream, pid) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")


def started(job):
    """Log the run with what the jobs before it were; the upstream read and the time."""
    upstream = job.upstream()
    early = any(up.status not in ("done", "dead", "cancelled") for up in upstream)
    at = time.time()
    if EXEC_LOG:
        line = (f"{at:.6f} {os.getpid()} {job.id} {job.attempt} {job.payload['role']} "
                f"{'early' if early else 'ok'}\n")
        fd = os.open(EXEC_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    work_ms = float(job.payload.get("work_ms", 0))
    if work_ms > 0:
        time.sleep(work_ms / 1000.0)
    return upstream, at


@prefork.handler("flow.step")
def step(job):
    upstream, at = started(job)
    if job.payload.get("doomed"):
        raise prefork.PermanentError("doomed by the test")
    if job.payload.get("flaky") and job.attempt == 1:
        raise RuntimeError("flaky first attempt")
    with job.transaction() as cursor:
        cursor.execute(LEDGER_INSERT, (
            job.id, job.payload["run"], job.payload["workflow"], job.payload["role"], at,
            time.time(), json.dumps(sorted(up.id for up in upstream if up.status == "done")),
            os.getpid()))


@prefork.handler("flow.quick")
def quick(job):
    started(job)


@prefork.handler("flow.sum")
def add_up(job):
    """payload['n'] plus the results of the jobs before it: a chain passes its sums on."""
    return job.payload.get("n", 0) + sum(up.result or 0 for up in job.upstream())
