"""Bulk enqueue (issue 17): Store.enqueue_many, and `enqueue --file` through it, on
every backend (MySQL in both dialects where conftest.DIALECT_MODULES names this
module; PREFORK_QUEUE_DIALECT=mysql runs it in the mysql dialect otherwise).

On MySQL the jobs go as multi-row INSERTs in bounded chunks (store/mysql/bulk.py):
idempotency must hold inside one statement, across statements and against the
table; the count of new jobs, the limited flag and the concurrency key stay right.
"""
import json
from datetime import datetime, timedelta

from conftest import run_cli

from prefork.jobs import new_job
from prefork.limits.rules import NO_KEY, LimitRule
from prefork.store.mysql.bulk import CHUNK_BYTES, CHUNK_ROWS, chunks

# Enough jobs for three statements of CHUNK_ROWS rows.
MANY = 2 * CHUNK_ROWS + 100


def _rows(db, sql, args=()):
    if db.backend == "sqlite":
        return db.conn.execute(db.sql(sql), args).fetchall()
    with db.conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def test_every_job_is_inserted_once_with_its_fields(backend_store, db):
    store = backend_store()
    store.publish_limits([LimitRule("report", concurrency=2)], ["report"])
    jobs = [new_job("report" if number % 3 == 0 else "mail", {"n": number}, queue="bulk",
                    priority=number % 5, concurrency_key=f"acct-{number % 4}" if number % 2 else None)
            for number in range(MANY)]
    assert store.enqueue_many(jobs) == MANY
    rows = _rows(db, "SELECT payload, job_type, priority, concurrency_key, limited, status"
                     " FROM prefork_jobs WHERE queue = 'bulk' ORDER BY id")
    assert len(rows) == MANY
    for number, (payload, job_type, priority, key, flag, status) in enumerate(rows):
        assert json.loads(payload) == {"n": number}   # in the order given
        assert (job_type, priority, status) == (jobs[number].type, number % 5, "ready")
        assert key == (f"acct-{number % 4}" if number % 2 else NO_KEY)
        assert flag == (1 if job_type == "report" else 0)


def test_a_key_repeated_in_a_chunk_across_chunks_and_in_the_table_adds_one_job(backend_store, db):
    store = backend_store()
    first = store.enqueue(new_job("mail", {"v": "first"}, queue="keys", key="held"))
    keyed = [new_job("mail", {"v": number}, queue="keys", key=f"k{number % (CHUNK_ROWS + 7)}")
             for number in range(MANY)]   # each key twice: in one chunk, or in the next
    keyed.insert(5, new_job("mail", {"v": "again"}, queue="keys", key="held"))
    keyed.insert(6, new_job("mail", {"v": "again"}, queue="keys", key="held"))
    unique = CHUNK_ROWS + 7
    assert store.enqueue_many(keyed) == unique
    assert store.enqueue_many(keyed) == 0
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'keys'") == unique + 1
    held = store.get(first)
    assert json.loads(held["payload"]) == {"v": "first"}   # the existing job is kept
    # The first job of each key is the one kept.
    payload = db.scalar("SELECT payload FROM prefork_jobs WHERE queue = 'keys'"
                        " AND idempotency_key = 'k3'")
    assert json.loads(payload) == {"v": 3}
    # The same key in another queue is another job.
    assert store.enqueue_many([new_job("mail", queue="other", key="held")]) == 1


def test_delays_and_run_at_are_kept(backend_store, db):
    store = backend_store()
    later = datetime.utcnow() + timedelta(hours=2)
    assert store.enqueue_many([new_job("mail", queue="when", key="now"),
                               new_job("mail", queue="when", key="hour", delay=3600),
                               new_job("mail", queue="when", key="at", run_at=later)]) == 3
    assert store.ready_count(["when"], 10) == 1
    found = dict(_rows(db, "SELECT idempotency_key, available_at FROM prefork_jobs"
                           " WHERE queue = 'when'"))
    times = {key: db.row(db.scalar("SELECT id FROM prefork_jobs WHERE idempotency_key = %s",
                                   (key,)))["available_at"] for key in found}
    assert timedelta(minutes=59) < times["hour"] - times["now"] < timedelta(minutes=61)
    assert abs(times["at"] - later) < timedelta(seconds=1)


def test_mysql_sends_one_statement_per_chunk(store):
    s = store()
    before = _com_insert(s)
    assert s.enqueue_many([new_job("mail", {"n": number}) for number in range(MANY)]) == MANY
    assert _com_insert(s) - before == 3   # not one per job


def _com_insert(store):
    return int(store._one("SHOW SESSION STATUS LIKE 'Com_insert'")[1])


def test_chunks_are_bounded_in_rows_and_in_payload_bytes():
    small = [new_job("mail", {"n": number}) for number in range(CHUNK_ROWS * 2 + 1)]
    assert [len(chunk) for chunk in chunks(small)] == [CHUNK_ROWS, CHUNK_ROWS, 1]
    big = "x" * (CHUNK_BYTES // 3)
    heavy = [new_job("mail", {"blob": big}, max_payload_bytes=CHUNK_BYTES * 2)
             for _ in range(7)]
    sizes = [len(chunk) for chunk in chunks(heavy)]
    assert sum(sizes) == 7 and max(sizes) <= 3
    alone = [new_job("mail", {"blob": "y" * (CHUNK_BYTES + 10)}, max_payload_bytes=CHUNK_BYTES * 2),
             new_job("mail")]
    assert [len(chunk) for chunk in chunks(alone)] == [1, 1]
    assert list(chunks([])) == []


def test_enqueue_file_counts_new_and_present_jobs(backend, request, backend_store, db, tmp_path):
    config = request.getfixturevalue("make_config" if backend == "mysql"
                                     else "make_sqlite_config")()
    backend_store().enqueue(new_job("mail", queue="file", key="line-0"))
    lines = [{"type": "mail", "payload": {"n": number}, "queue": "file", "key": f"line-{number}"}
             for number in range(CHUNK_ROWS + 50)]
    lines.append(lines[10])   # the same line twice in one file
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run_cli("enqueue", "--file", str(path), dsn=config.dsn)
    assert done.returncode == 0, done.stderr
    assert f"enqueued {CHUNK_ROWS + 49} new jobs (2 already present)" in done.stdout
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'file'") == CHUNK_ROWS + 50

