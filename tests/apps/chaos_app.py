"""Handlers for the chaos soak (tests/chaos.py, tests/soak/test_chaos.py).

`chaos.ledger` first appends one line to the execution log (CHAOS_EXEC_LOG,
opened O_APPEND, so lines of concurrent children never mix), then works for
payload['work_ms'] milliseconds, then writes its ledger row in the
transaction that marks the job done, and works payload['tx_work_ms'] more
inside that transaction (a slow effect: the job's row stays locked meanwhile).
The execution log shows every run, re-executions included; the ledger
(PRIMARY KEY on the idempotency key) must end with exactly one row per job.

`chaos.plain` only logs its run and works payload['work_ms']: it opens no
transaction, so the worker writes its completion, with its batch's when it
was claimed in one (or the supervisor does, for a busy or dead child).
"""
import os
import time

import prefork

EXEC_LOG = os.environ.get("CHAOS_EXEC_LOG")

LEDGER_INSERT = ("INSERT INTO chaos_ledger (idempotency_key, run_id, job_id, attempt, pid,"
                 " written_at) VALUES (%s, %s, %s, %s, %s, UTC_TIMESTAMP(6))")


def log_execution(job):
    """One line per run: wall time, pid, job id, attempt, key. One write() on an
    O_APPEND descriptor, so the line lands whole even if we are killed next."""
    if not EXEC_LOG:
        return
    line = f"{time.time():.6f} {os.getpid()} {job.id} {job.attempt} {job.idempotency_key}\n"
    fd = os.open(EXEC_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def work(job):
    work_ms = float(job.payload.get("work_ms", 0))
    if work_ms > 0:
        time.sleep(work_ms / 1000.0)


@prefork.handler("chaos.plain")
def plain(job):
    log_execution(job)
    work(job)


@prefork.handler("chaos.ledger")
def ledger(job):
    log_execution(job)
    work(job)
    with job.transaction() as cursor:
        cursor.execute(LEDGER_INSERT, (job.idempotency_key, job.payload["run"], job.id,
                                       job.attempt, os.getpid()))
        tx_work_ms = float(job.payload.get("tx_work_ms", 0))
        if tx_work_ms > 0:
            time.sleep(tx_work_ms / 1000.0)
