"""A handler's own transaction (job.transaction()) on MySQL, in both dialects: the
completion fences and locks first, so the effect and the completion commit
together or not at all, in three round trips a job (the effect's one included),
counted at the wire: autocommit off goes ahead of the fence, in its round trip."""
import pymysql
import pytest
import query_tap
from conftest import DIALECTS, SERVER, wait_until
from query_tap import COM_QUERY, QueryTap

from prefork.errors import LeaseLost
from prefork.jobs import new_job
from prefork.store.mysql.completion_queries import COMPLETE

WORKER = "effects-host:1"
INSERT = "INSERT INTO ledger VALUES (%s, %s)"
COM_SET_OPTION = 0x1B
both_dialects = pytest.mark.parametrize("dialect", DIALECTS, indirect=True,
                                        ids=[f"{name}_dialect" for name in DIALECTS])


def scalar(conn, sql, args=None):
    with conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchone()[0]


def assert_autocommits(s, conn, key):
    """The store's session autocommits again: a plain write is seen by others at once."""
    s._rowcount(INSERT, (key, 0))
    assert scalar(conn, "SELECT COUNT(*) FROM ledger WHERE idempotency_key = %s", (key,)) == 1


@both_dialects
def test_an_effect_of_a_job_whose_lease_was_taken_over_is_rolled_back(store, clean_db, dialect):
    first, second = store(), store()
    job_id = first.enqueue(new_job("ledger"))
    [stale] = first.claim(["default"], WORKER, 0.1)
    wait_until(lambda: second.recover_expired() == 1, message="the lease to run out")
    [fresh] = second.claim(["default"], "effects-host:2", 30)
    ran = []
    with pytest.raises(LeaseLost):
        with stale.transaction() as cursor:
            ran.append(cursor.execute(INSERT, ("stale", job_id)))
    assert not ran and not stale.finished
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 0
    assert scalar(clean_db, "SELECT lease_token FROM prefork_jobs WHERE id = %s",
                  (job_id,)) == fresh.lease_token
    assert_autocommits(first, clean_db, "after the loss")
    with fresh.transaction() as cursor:
        cursor.execute(INSERT, ("fresh", job_id))
    assert scalar(clean_db, "SELECT status FROM prefork_jobs WHERE id = %s", (job_id,)) == "done"


@both_dialects
def test_a_lease_that_runs_out_during_the_effect_cannot_be_taken(store, clean_db, dialect):
    """Once the completion's first statement succeeded, the row is ours until the
    commit: recovery and claims skip it, and the effect commits once."""
    s, other = store(), store()
    job_id = s.enqueue(new_job("ledger"))
    [job] = s.claim(["default"], WORKER, 0.2)
    with job.transaction() as cursor:
        cursor.execute(INSERT, ("once", job_id))
        wait_until(lambda: scalar(clean_db, "SELECT lease_until < UTC_TIMESTAMP(6) FROM"
                                  " prefork_jobs WHERE id = %s", (job_id,)),
                   message="the lease to run out")
        assert other.recover_expired() == 0
        assert other.claim(["default"], "effects-host:2", 30) == []
    assert job.finished
    assert scalar(clean_db, "SELECT status FROM prefork_jobs WHERE id = %s", (job_id,)) == "done"
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 1
    assert other.recover_expired() == 0


@both_dialects
def test_a_handler_that_raises_leaves_neither_effect_nor_completion(store, clean_db, dialect):
    s = store()
    job_id = s.enqueue(new_job("ledger"))
    [job] = s.claim(["default"], WORKER, 30)
    server_wait = scalar(clean_db, "SELECT @@GLOBAL.wait_timeout")
    with pytest.raises(RuntimeError):
        with job.transaction() as cursor:
            cursor.execute(INSERT, ("broken", job_id))
            raise RuntimeError("the handler broke after writing")
    assert not job.finished
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 0
    assert scalar(clean_db, "SELECT status FROM prefork_jobs WHERE id = %s",
                  (job_id,)) == "reserved"
    assert s._one("SELECT @@SESSION.wait_timeout")[0] == server_wait
    assert_autocommits(s, clean_db, "after the raise")
    with job.transaction() as cursor:   # the lease is still ours: it can complete
        cursor.execute(INSERT, ("fixed", job_id))
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger WHERE job_id = %s", (job_id,)) == 1


@both_dialects
def test_a_stacked_statement_is_refused_and_nothing_commits(store, clean_db, dialect):
    s = store()
    job_id = s.enqueue(new_job("ledger"))
    [job] = s.claim(["default"], WORKER, 30)
    with pytest.raises(pymysql.err.ProgrammingError):
        with job.transaction() as cursor:
            cursor.execute("INSERT INTO ledger VALUES ('injected', 1); DELETE FROM prefork_jobs")
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 0
    assert scalar(clean_db, "SELECT status FROM prefork_jobs WHERE id = %s",
                  (job_id,)) == "reserved"
    assert_autocommits(s, clean_db, "after the refusal")


@both_dialects
def test_a_failed_start_closes_the_session_and_the_fence_changes_nothing(store, clean_db,
                                                                         dialect, monkeypatch):
    """Autocommit off goes ahead of COMPLETE, which runs even when that failed: with
    autocommit on it matches nothing (it would commit alone, without the effect), and
    the failure closes the session before the handler gets a cursor."""
    s = store()
    job_id = s.enqueue(new_job("ledger"))
    [job] = s.claim(["default"], WORKER, 30)
    assert s._rowcount(COMPLETE, job.lease) == 0   # autocommit on: the fence refuses
    monkeypatch.setattr(s, "completion_start", "SET SESSION autocommit = 'neither'")
    monkeypatch.setattr(s, "_completion_start_args", lambda: ())
    ran = []
    with pytest.raises(pymysql.err.MySQLError):
        with job.transaction() as cursor:
            ran.append(cursor.execute(INSERT, ("unstarted", job_id)))
    assert not ran and not job.finished and not s.conn.open
    assert scalar(clean_db, "SELECT status FROM prefork_jobs WHERE id = %s",
                  (job_id,)) == "reserved"
    assert scalar(clean_db, "SELECT COUNT(*) FROM ledger") == 0


class RoundTrips(query_tap.Session):
    """A tapped session that numbers its round trips: the commands a client sends
    before the server answered any of them share one. (The tap sees an answer before
    passing it on, so a command sent after an answer cannot join the trip before.)"""

    def __init__(self, on_greeting):
        super().__init__(on_greeting)
        self.trip = 0
        self.answered = False

    def from_server(self, data):
        self.answered = True
        super().from_server(data)

    def from_client(self, data):
        before = len(self.commands)
        super().from_client(data)
        if len(self.commands) > before and self.answered:
            self.trip, self.answered = self.trip + 1, False
        self.commands[before:] = [(*sent, self.trip) for sent in self.commands[before:]]


def round_trips(sent):
    """The commands [(command, sql, trip)] grouped by round trip: [[command, ...]]."""
    trips = {}
    for command, _, trip in sent:
        trips.setdefault(trip, []).append(command)
    return list(trips.values())


@both_dialects
def test_a_run_of_effect_jobs_costs_three_round_trips_a_job(make_config, store, clean_db,
                                                            dialect, monkeypatch):
    """Counted at the wire on the store's own connection: from the claim of three
    jobs to their three commits, three round trips a job: the fence (autocommit off
    ahead of it; multi-statements off for the run ahead of the first job's), the
    handler's INSERT, the commit. In the mariadb dialect autocommit stays off from
    one job's commit to the next job's fence, and comes back on ahead of the next
    other statement; the next claim switches multi-statements back on ahead of its
    script."""
    monkeypatch.setattr(query_tap, "Session", RoundTrips)
    database = make_config().dsn.rsplit("/", 1)[1]
    with QueryTap(SERVER["host"], SERVER["port"]) as tap:
        s = store(dsn=f"mysql://{SERVER['user']}@127.0.0.1:{tap.port}/{database}")
        for _ in range(4):
            s.enqueue(new_job("ledger"))
        jobs = s.claim(["default"], WORKER, 30, limit=3)
        assert len(jobs) == 3
        before = len(tap.commands(s.connection_id()))
        for job in jobs:
            with job.transaction() as cursor:
                cursor.execute(INSERT, (f"key-{job.id}", job.id))
        run = round_trips(tap.commands(s.connection_id())[before:])
        before = len(tap.commands(s.connection_id()))
        assert len(s.claim(["default"], WORKER, 30)) == 1
        claim = round_trips(tap.commands(s.connection_id())[before:])
        assert_autocommits(s, clean_db, "after the run")
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_jobs WHERE status = 'done'") == 3
    first_job = [[COM_SET_OPTION, COM_QUERY, COM_QUERY], [COM_QUERY], [COM_QUERY]]
    next_fence = [COM_QUERY] if dialect == "mariadb" else [COM_QUERY, COM_QUERY]
    next_job = [next_fence, [COM_QUERY], [COM_QUERY]]
    assert run == first_job + next_job * 2, run
    assert [COM_SET_OPTION, COM_QUERY] in claim and [COM_SET_OPTION] not in claim, claim
    if dialect == "mariadb":   # autocommit back on, ahead of the claim's first read
        assert claim[0] == [COM_QUERY, COM_QUERY], claim
