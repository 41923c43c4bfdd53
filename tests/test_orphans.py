"""No job is ever run by two processes at once, nor left reserved and unrun, however a
child stops: its parent killed under it (issue 11, item 7), or told to retire while its
completion claims the next job (item 8). Real supervisors, real signals, real MariaDB."""
import signal
import time

import pytest
from conftest import scalar, wait_until
from harness import supervisor_starter

from prefork.jobs import new_job

APPS = "--app", "ledger_app,supervised_app"


@pytest.fixture
def supervisor(tmp_path, migrated, clean_db):
    with supervisor_starter(tmp_path, migrated, *APPS) as start:
        yield start


@pytest.fixture
def enqueue(store):
    s = store()
    return lambda job_type, payload=None, **kw: s.enqueue(new_job(job_type, payload or {}, **kw))


def unfinished(conn):
    return scalar(conn, "SELECT COUNT(*) FROM prefork_jobs WHERE status <> 'done'")


def test_a_rolling_reload_strands_no_job(supervisor, enqueue, clean_db, tmp_path):
    """SIGHUP retires every child, one at a time, with SIGTERM; one that gets it while its
    completion also claims the next job must give that job back, not leave it reserved
    and unrun until its lease (300 s here: far beyond this test's waits) runs out."""
    log = tmp_path / "ran.log"
    ids = [enqueue("tally", {"seconds": 0.05, "log": str(log)}) for _ in range(80)]
    sup = supervisor("--workers", "4", "--lease-seconds", "300")
    sup.wait_event("job_claimed")
    for _ in range(12):
        sup.signal(signal.SIGHUP)
        time.sleep(0.1)
    wait_until(lambda: unfinished(clean_db) == 0, timeout=30,
               message="every job done (a stranded one stays reserved, unrun, for 300 s)")
    assert sorted(int(line) for line in log.read_text().split()) == ids
