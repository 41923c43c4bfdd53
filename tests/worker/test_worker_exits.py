"""Handlers that end their process, or try to (sys.exit(), SystemExit, KeyboardInterrupt,
GeneratorExit, os._exit()), under a real supervisor on SQLite and on MariaDB: each job
ends dead within a bounded number of forks, never spins the pool.

A BaseException out of a handler is the job's failure, recorded like any other (retried
with backoff, dead once out of attempts), and its worker goes on. A worker that dies
while running a job (os._exit(0), os._exit(4), which is also the exit code of a worker's
own database failure) costs that job a crash, so --max-crashes ends it."""
import pytest
from conftest import wait_until
from harness import supervisor_starter
from django_harness import line, project  # noqa: F401  (fixtures: the Django project per database)

from prefork.jobs import new_job

WORKERS = 2
MAX_ATTEMPTS = 3
MAX_CRASHES = 3
BASE_ARGS = ("--app", "exits_app", "--workers", str(WORKERS), "--retry-base", "0.05",
             "--max-crashes", str(MAX_CRASHES), "--poll-interval", "0.2")
# A handler's BaseException: (job type, the error it leaves).
RAISED = [("exits.sys_exit", "SystemExit: 3"), ("exits.system_exit", "SystemExit"),
          ("exits.keyboard_interrupt", "KeyboardInterrupt"),
          ("exits.generator_exit", "GeneratorExit")]
EXIT_CODES = (0, 4)   # os._exit(4) looks like a worker's own database failure (worker_fatal)


@pytest.fixture
def supervisor(tmp_path, queue_dsn, db):
    with supervisor_starter(tmp_path, queue_dsn, *BASE_ARGS) as start:
        yield start


def enqueue_all(backend_store):
    queue = backend_store()
    raised = {queue.enqueue(new_job(job_type, max_attempts=MAX_ATTEMPTS)): error
              for job_type, error in RAISED}
    exited = {queue.enqueue(new_job("exits.os_exit", {"code": code},
                                    max_attempts=MAX_ATTEMPTS)): code
              for code in EXIT_CODES}
    return raised, exited


def all_dead(db, job_ids):
    rows = {job_id: db.row(job_id) for job_id in job_ids}
    return rows if all(row["status"] == "dead" for row in rows.values()) else None


@pytest.mark.parametrize("mode", [(), ("--max-items", "1")], ids=["pool", "fork-per-job"])
def test_a_handler_that_exits_ends_dead_within_bounded_forks(supervisor, backend_store, db,
                                                             mode):
    raised, exited = enqueue_all(backend_store)
    sup = supervisor(*mode)
    rows = wait_until(lambda: all_dead(db, [*raised, *exited]), timeout=60, interval=0.2,
                      message="every job dead")
    for job_id, error in raised.items():   # each attempt a recorded failure, no death
        row = rows[job_id]
        assert (row["attempts"], row["crashes"], row["last_error"]) == \
            (MAX_ATTEMPTS, 0, error), row
    for job_id, code in exited.items():   # each death a crash, until --max-crashes
        row = rows[job_id]
        assert (row["crashes"], row["last_error"]) == \
            (MAX_CRASHES, f"crashed its worker {MAX_CRASHES} times: exit code {code}"), row
    # The job a worker died running is charged; the others it held (claimed in its
    # batch, not started) go back uncharged. The parent logs a hand-back, and then the
    # worker's exit, just after it writes the job's row: wait for the last ones.
    crashes = len(exited) * MAX_CRASHES
    wait_until(lambda: len(charged_hand_backs(sup)) >= crashes
               and (mode or len(sup.events("worker_exited")) >= crashes), timeout=60,
               interval=0.2, message="the last crash's hand-back and exit logged")
    assert sorted(charged_hand_backs(sup)) == sorted(
        (job_id, f"exit code {code}") for job_id, code in exited.items()
        for _ in range(MAX_CRASHES))
    handed_back = sup.events("job_handed_back")
    assert all(event["cause"].endswith("before it started") for event in handed_back
               if not event["charged"]), handed_back
    assert not sup.events("worker_fatal")
    # The forks: the pool's, one per job with --max-items 1, and one per crash; no more.
    spawned = len(sup.events("worker_spawned"))
    runs = len(raised) * MAX_ATTEMPTS + crashes
    bound = WORKERS + (runs if mode else crashes)
    print(f"forks: {spawned} (bound {bound}: {WORKERS} workers and "
          f"{f'{runs} runs' if mode else f'{crashes} crashes'})")
    assert spawned <= bound, spawned
    exits = sup.events("worker_exited")
    if not mode:   # only the deaths of the os._exit() jobs' workers
        assert len(exits) == crashes, exits
    assert sup.proc.poll() is None


def charged_hand_backs(sup):
    return [(event["job_id"], event["cause"]) for event in sup.events("job_handed_back")
            if event["charged"]]


# -- through the Django backend ----------------------------------------------------------

def test_a_django_task_that_exits_reads_failed(project):
    exits = project.enqueue("exits", 3)
    sup = project.supervisor("--max-crashes", str(MAX_CRASHES))
    failed = project.wait_result(exits, "FAILED")
    assert failed["attempts"] == 2   # the project's OPTIONS max_attempts
    assert failed["errors"] == ["builtins.SystemExit"] * 2
    assert not sup.log.events("worker_fatal") and not sup.log.events("worker_exited")
    # The pool's two, nothing more (the second may be logged after the first ran it all).
    wait_until(lambda: len(sup.log.events("worker_spawned")) >= 2, timeout=60,
               message="the pool's two workers spawned")
    assert len(sup.log.events("worker_spawned")) == 2
