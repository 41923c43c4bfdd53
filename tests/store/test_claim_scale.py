"""Claims as the work grows (issue 17), through the Store API on every backend:
many queues (a worker listing 20 queues whose jobs sit in the last), delayed jobs
in the worked queue, many priorities. What must hold: the earlier queue first,
then priority, then due time; a paused queue is claimed by nobody; a delayed job
is neither claimed nor counted, and neither read: the claim and the ready count
read only where due jobs are (MySQL: the server's handler counters of the store's
own session; SQLite: the virtual machine steps of the store's connection).
"""
import pytest

from prefork.jobs import new_job
from prefork.limits.rules import LimitRule
from prefork.store.mysql.due import MAX_LEVELS
from prefork.store.mysql.due_queries import due_levels

WORKER = "scale-host:1"
QUEUES = [f"q{number}" for number in range(1, 21)]
HOUR = 3600
LIMITED = LimitRule("report", concurrency=1)


def ids_of(jobs):
    return [job.id for job in jobs]


def enqueue(store, queue, count, **fields):
    return [store.enqueue(new_job("noop", {"n": number}, queue=queue, **fields))
            for number in range(count)]


def test_the_earlier_queue_first_and_a_paused_queue_never(backend_store):
    store = backend_store()
    third = enqueue(store, "q3", 2)
    enqueue(store, "q7", 5)
    last = enqueue(store, "q20", 10)
    store.set_paused("q7", True)
    assert store.ready_count(QUEUES, 100) == 12
    assert ids_of(store.claim(QUEUES, WORKER, 30, limit=5)) == third + last[:3]
    assert ids_of(store.claim(QUEUES, WORKER, 30, limit=50)) == last[3:]
    assert store.claim(QUEUES, WORKER, 30, limit=5) == []
    assert store.ready_count(QUEUES, 100) == 0
    store.set_paused("q7", False)
    assert len(store.claim(QUEUES, WORKER, 30, limit=50)) == 5


def test_complete_and_claim_completes_whether_or_not_jobs_are_due(backend_store):
    store = backend_store()
    enqueue(store, "q1", 1)
    first = store.claim(QUEUES, WORKER, 30)
    later = enqueue(store, "q20", 3)
    done, claimed = store.complete_and_claim([first[0].lease], QUEUES, WORKER, 30, limit=2)
    assert (done, ids_of(claimed)) == ({first[0].id}, later[:2])
    store.enqueue(new_job("noop", queue="q5", delay=HOUR))
    done, claimed = store.complete_and_claim([job.lease for job in claimed], QUEUES[:10],
                                             WORKER, 30, limit=2)
    assert (done, claimed) == (set(later[:2]), [])   # q5's job is not due: nothing claimed


def test_priority_then_due_time_and_delayed_jobs_wait(backend_store):
    store = backend_store()
    expected = []
    for priority in (3, -2, 0):
        enqueue(store, "w", 4, priority=priority, delay=HOUR)
        expected += [(priority, job_id) for job_id in enqueue(store, "w", 2, priority=priority)]
        enqueue(store, "w", 4, priority=priority, delay=HOUR)
    expected.sort()
    assert store.ready_count(["w"], 100) == 6
    assert store.ready_count(["w"], 4) == 4
    claimed = store.claim(["w"], WORKER, 30, limit=100)
    assert ids_of(claimed) == [job_id for _, job_id in expected]
    assert store.claim(["w"], WORKER, 30, limit=100) == []
    assert store.ready_count(["w"], 100) == 0


def test_more_due_priorities_than_one_read_takes_keep_their_order(backend_store):
    """MySQL reads at most MAX_LEVELS due priorities of a queue at a time: the later
    queue waits until the first one's jobs are all claimed, in priority order."""
    store = backend_store()
    first = [(priority, store.enqueue(new_job("noop", queue="q1", priority=priority)))
             for priority in reversed(range(MAX_LEVELS + 8))]
    second = enqueue(store, "q2", 3)
    taken = []
    while True:
        claimed = store.claim(["q1", "q2"], WORKER, 30, limit=7)
        if not claimed:
            break
        taken += ids_of(claimed)
    assert taken == [job_id for _, job_id in sorted(first)] + second


def test_a_paused_queue_with_more_due_priorities_than_one_read_takes_holds_none_back(
        backend_store):
    store = backend_store()
    enqueue(store, "q1", 1)
    for priority in range(MAX_LEVELS + 2):
        store.enqueue(new_job("noop", queue="q2", priority=priority))
    third = enqueue(store, "q3", 2)
    store.set_paused("q2", True)
    assert [job.queue for job in store.claim(["q1", "q2"], WORKER, 30, limit=5)] == ["q1"]
    assert store.ready_count(["q2", "q3"], 100) == 2
    assert ids_of(store.claim(["q2", "q3"], WORKER, 30, limit=5)) == third


# -- what is read ------------------------------------------------------------------------

def _fill_delayed(store, db, delayed):
    """`delayed` jobs due in an hour in queue w, over three priorities, and a few due."""
    store.enqueue_many([new_job("noop", queue="w", priority=number % 3, delay=HOUR)
                        for number in range(delayed)])
    if db.backend == "mysql":
        db.execute("ANALYZE TABLE prefork_jobs")


def _reads(store, db, action):
    """What `action` read: index entries read in order by the store's session (MySQL),
    or virtual machine steps of the store's connection (SQLite)."""
    if db.backend == "mysql":
        before = _entries_read(store)
        action()
        return _entries_read(store) - before - _entries_read_of_nothing(store)
    steps = [0]

    def count():
        steps[0] += 1
    store.conn.set_progress_handler(count, 1)
    try:
        action()
    finally:
        store.conn.set_progress_handler(None, 1)
    return steps[0]


def _entries_read(store):
    """Index entries the session read in order: those returned (Handler_read_next),
    and those MariaDB's index condition pushdown turned down inside the engine
    (attempts - matches), which a read of columns outside the index makes."""
    counters = {name: int(value) for name, value in store._all(
        "SHOW SESSION STATUS WHERE Variable_name IN"
        " ('Handler_read_next', 'Handler_icp_attempts', 'Handler_icp_match')")}
    return (counters["Handler_read_next"] + counters.get("Handler_icp_attempts", 0)
            - counters.get("Handler_icp_match", 0))


def _entries_read_of_nothing(store):
    before = _entries_read(store)
    return _entries_read(store) - before


@pytest.mark.parametrize("look", ["ready_count", "claim"])
def test_delayed_jobs_are_not_read(backend_store, db, look):
    store = backend_store()

    def ready_look(expected):
        assert store.ready_count(["w"], 32) == len(expected)

    def claim_look(expected):
        assert ids_of(store.claim(["w"], WORKER, 30, limit=32)) == expected

    act = ready_look if look == "ready_count" else claim_look
    empty = _reads(store, db, lambda: act([]))
    _fill_delayed(store, db, 3000)
    due = enqueue(store, "w", 3, priority=1)
    busy = _reads(store, db, lambda: act(due))
    store.claim(["w"], WORKER, 30, limit=32)   # the due ones (if the look did not take them)
    idle = _reads(store, db, lambda: act([]))
    if db.backend == "mysql":
        # At most the due rows (and the entry after each): never the delayed ones.
        assert empty == 0 and busy <= 3 + 3 and idle <= 3, (empty, busy, idle)
    else:
        # Steps grow with the rows read: 3,000 delayed rows would be tens of thousands.
        assert busy < 2000 and idle < 4 * empty + 500, (empty, busy, idle)


def test_mysql_a_claim_of_20_queues_sends_as_many_statements_wherever_the_jobs_are(store):
    s = store()

    def statements(queue):
        enqueue(s, queue, 4)
        before = _questions(s)
        assert len(s.claim(QUEUES, WORKER, 30, limit=4)) == 4
        return _questions(s) - before

    assert statements("q20") == statements("q1")   # empty queues cost no statement


def _questions(store):
    return int(store._one("SHOW SESSION STATUS LIKE 'Questions'")[1])


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "limited"])
def test_mysql_the_due_priorities_are_read_one_index_entry_each(store, mysql_db, limited):
    """Where due jobs are (due_queries.py), without limits or with them: a loose
    index scan of the claim index (one entry per priority), not the queue's rows."""
    s, db = store(), mysql_db
    if limited:
        s.publish_limits([LimitRule("noop", concurrency=1)], ["noop"])   # its jobs are limited
    _fill_delayed(s, db, 3000)
    enqueue(s, "w", 2, priority=2)
    with db.conn.cursor() as cursor:
        cursor.execute("EXPLAIN " + due_levels(2, limited), ("w", "x"))
        plan = cursor.fetchall()
    jobs_rows = [row for row in plan if row[2] == "prefork_jobs"]
    assert jobs_rows and all("filesort" not in (row[9] or "") for row in jobs_rows), plan
    assert "Using index for group-by" in (jobs_rows[0][9] or ""), plan
    count = s.limited_ready if limited else s.ready_count
    assert count(["w"], 32) == 2
    assert _reads(s, db, lambda: count(["w"], 32)) <= 2 + 2


def test_mysql_the_due_read_of_20_queues_is_one_read_not_one_per_queue(store):
    """One loose scan over the 20 queues' ranges: as many temporary tables as the
    read of the one queue with jobs (a union of one read per queue made one each)."""
    s = store()
    enqueue(s, "q20", 4, priority=1)

    def temporary_tables(queues):
        before = _session(s, "Created_tmp_tables")
        assert s.ready_count(queues, 100) == 4
        return _session(s, "Created_tmp_tables") - before

    assert temporary_tables(QUEUES) == temporary_tables(["q20"])


def _session(store, name):
    return int(store._one("SHOW SESSION STATUS LIKE %s", (name,))[1])


# -- the limited claim and the supervisor's limited look ---------------------------------



def _claim_limited(store, queues=("w",), limit=8):
    return store.claim_limited(list(queues), WORKER, 30, limit, None, {"report": LIMITED})[0]


def test_a_limited_claim_reads_past_more_full_priorities_than_one_plain_read_takes(
        backend_store):
    """A full group's jobs at more due priorities than a plain claim reads at once
    (MAX_LEVELS), another group's job after them, a later queue's after that: both
    are claimed, in queue order, and the look counts at most its limit per queue."""
    store = backend_store()
    store.publish_limits([LIMITED], ["report"])
    store.enqueue_many([new_job("report", queue="w", concurrency_key="busy", priority=priority)
                        for priority in range(MAX_LEVELS + 4)])
    [busy] = _claim_limited(store, limit=1)
    quiet = store.enqueue(new_job("report", queue="w", concurrency_key="quiet",
                                  priority=MAX_LEVELS + 8))
    later = store.enqueue(new_job("report", queue="x", concurrency_key="later"))
    store.enqueue_many([new_job("report", queue="x", concurrency_key="later") for _ in range(2)])
    assert store.limited_ready(["w", "x"], 2) == 2 + 2
    assert store.limited_ready(["w", "x"], 100) == MAX_LEVELS + 3 + 1 + 3
    assert ids_of(_claim_limited(store, queues=["w", "x"])) == [quiet, later]
    assert busy.id not in (quiet, later)


def _fill_delayed_limited(store, db, delayed):
    """`delayed` limited jobs due in an hour in queue w, over priorities 0-2."""
    store.publish_limits([LIMITED], ["report"])
    store.enqueue_many([new_job("report", queue="w", concurrency_key=str(number),
                                priority=number % 3, delay=HOUR) for number in range(delayed)])
    db.execute("ANALYZE TABLE prefork_jobs")


def test_mysql_the_limited_claim_reads_no_delayed_job(store, mysql_db):
    """Due limited jobs behind thousands of delayed ones of an earlier priority (and
    of their own): claimed, without reading the delayed ones."""
    s = store()
    _fill_delayed_limited(s, mysql_db, 3000)
    due = [s.enqueue(new_job("report", queue="w", concurrency_key=str(priority),
                             priority=priority)) for priority in (1, 5)]
    claimed = []
    busy = _reads(s, mysql_db, lambda: claimed.extend(_claim_limited(s)))
    idle = _reads(s, mysql_db, lambda: claimed.extend(_claim_limited(s)))
    assert ids_of(claimed) == due
    # At most the due rows and the entry after each, then the running ones counted
    # (3,002 each before: every delayed row).
    assert busy <= 2 * len(due) and idle <= len(due), (busy, idle)


def test_mysql_the_supervisors_limited_look_reads_no_delayed_job(store, mysql_db):
    s = store()
    _fill_delayed_limited(s, mysql_db, 3000)
    counted = []
    idle = _reads(s, mysql_db, lambda: counted.append(s.limited_ready(["w", "x"], 1)))
    due = [s.enqueue(new_job("report", queue="w", priority=priority)) for priority in (2, 5)]
    busy = _reads(s, mysql_db, lambda: counted.append(s.limited_ready(["w", "x"], 1)))
    many = _reads(s, mysql_db, lambda: counted.append(s.limited_ready(["w", "x"], 32)))
    assert counted == [0, 1, len(due)]
    # Before: 3,000 (idle), 2,000 (busy), 3,002 (many).
    assert idle == 0 and busy == 0 and many <= 2 * len(due), (idle, busy, many)
