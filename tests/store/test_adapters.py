"""prefork.enqueue(), prefork.cancel() and prefork.notify() on every connection an
application may hold:
a DB-API connection of PyMySQL, mysqlclient (MySQLdb), mysql-connector-python or
sqlite3, and a SQLAlchemy 2 Connection or Session on each of them.

Real drivers on the real MariaDB (or a SQLite file), the real `work` command and the
real supervisor. The job rides the application's transaction: a rollback takes it back
with the application's row, a commit publishes both. Anything else is refused in one
line naming what is accepted.
"""
import sqlite3
import uuid
from contextlib import closing, contextmanager
from pathlib import Path

import MySQLdb
import mysql.connector
import mysql.connector.pooling
import pymysql
import pytest
import sqlalchemy
from conftest import SERVER, admin_connection, run_cli, scratch_database, wait_until
from harness import supervisor_starter
from sqlalchemy.orm import Session, scoped_session, sessionmaker

import prefork
from prefork import config as config_module
from prefork.errors import NoQueueDatabase
from prefork.store import open_store
from prefork.wakeups.doorbell import bell_directory

DRIVERS = ("pymysql", "mysqldb", "mysqlconnector", "sqlite3")
# How the application holds the connection: the driver's own, or SQLAlchemy's (a
# Session on an Engine, or on a Connection the application opened: its bind then).
HOLDERS = ("dbapi", "sqlalchemy_connection", "sqlalchemy_session", "sqlalchemy_scoped_session",
           "sqlalchemy_session_on_connection")
VARIANTS = [(driver, holder) for driver in DRIVERS for holder in HOLDERS] + \
    [("mysqlconnector_pooled", "dbapi")]   # a connection lent by the driver's own pool
SQLALCHEMY_SCHEME = {"pymysql": "mysql+pymysql", "mysqldb": "mysql+mysqldb",
                     "mysqlconnector": "mysql+mysqlconnector", "sqlite3": "sqlite+pysqlite"}
ACCEPTED = ("takes a DB-API connection of PyMySQL, mysqlclient (MySQLdb), "
            "mysql-connector-python or sqlite3, or a SQLAlchemy Session or Connection "
            "on one of them; got a ")


def dbapi_connection(driver, where):
    """A new connection of `driver` to `where` (a MySQL database's name, or a SQLite
    file), as an application opens it: its transactions left to the application."""
    if driver == "sqlite3":
        return sqlite3.connect(where, timeout=10)
    args = {"host": SERVER["host"], "port": SERVER["port"], "user": SERVER["user"],
            "password": "", "database": where}
    if driver == "pymysql":
        return pymysql.connect(**args)
    if driver == "mysqldb":
        return MySQLdb.connect(**args)
    if driver == "mysqlconnector":
        return mysql.connector.connect(**args)
    pool = mysql.connector.pooling.MySQLConnectionPool(
        pool_name=f"pq{uuid.uuid4().hex[:8]}", pool_size=1, **args)
    return pool.get_connection()


def sqlalchemy_url(driver, where):
    if driver == "sqlite3":
        return f"sqlite+pysqlite:///{where}"
    return f"{SQLALCHEMY_SCHEME[driver]}://{SERVER['user']}@{SERVER['host']}:" \
           f"{SERVER['port']}/{where}"


class Application:
    """What the application passes to prefork.enqueue() (`handle`), and its own work in
    the same transaction: a row of `orders`, then commit or rollback."""

    def __init__(self, handle, placeholder):
        self.handle = handle
        self.placeholder = placeholder

    def add_order(self, name):
        if self.placeholder is None:   # SQLAlchemy's
            self.handle.execute(sqlalchemy.text("INSERT INTO orders (name) VALUES (:name)"),
                                {"name": name})
        else:
            with closing(self.handle.cursor()) as cursor:
                cursor.execute(f"INSERT INTO orders (name) VALUES ({self.placeholder})",
                               (name,))

    def commit(self):
        self.handle.commit()

    def rollback(self):
        self.handle.rollback()


@contextmanager
def application(driver, holder, where):
    """An Application on `where` through `driver`, held as `holder` says; closed after."""
    if holder == "dbapi":
        conn = dbapi_connection(driver, where)
        try:
            yield Application(conn, "?" if driver == "sqlite3" else "%s")
        finally:
            conn.close()
        return
    engine = sqlalchemy.create_engine(sqlalchemy_url(driver, where))
    try:
        if holder == "sqlalchemy_connection":
            with engine.connect() as conn:
                yield Application(conn, None)
        elif holder == "sqlalchemy_session":
            with Session(engine) as session:
                yield Application(session, None)
        elif holder == "sqlalchemy_session_on_connection":
            with engine.connect() as conn, Session(bind=conn) as session:
                yield Application(session, None)
        else:
            scoped = scoped_session(sessionmaker(engine))
            try:
                yield Application(scoped, None)
            finally:
                scoped.remove()
    finally:
        engine.dispose()


class Target:
    """The queue database a variant enqueues into, with an `orders` table of the
    application's: its DSN, where its driver connects, and a TestDatabase on it."""

    def __init__(self, driver, holder, dsn, where, db):
        self.driver, self.holder = driver, holder
        self.dsn, self.where, self.db = dsn, where, db

    def application(self):
        return application(self.driver, self.holder, self.where)

    def orders(self):
        with closing(self.db.conn.cursor()) as cursor:
            cursor.execute("SELECT name FROM orders ORDER BY name")
            return [name for (name,) in cursor.fetchall()]

    def job_count(self):
        return self.db.scalar("SELECT COUNT(*) FROM prefork_jobs")


@pytest.fixture(params=VARIANTS, ids=["-".join(variant) for variant in VARIANTS])
def target(request):
    driver, holder = request.param
    if driver == "sqlite3":
        dsn, db = request.getfixturevalue("sqlite_migrated"), request.getfixturevalue("sqlite_db")
        where = db.path
    else:
        dsn, db = request.getfixturevalue("migrated"), request.getfixturevalue("mysql_db")
        where = db.database
    db.execute("DROP TABLE IF EXISTS orders")
    db.execute("CREATE TABLE orders (name VARCHAR(40) NOT NULL PRIMARY KEY)")
    return Target(driver, holder, dsn, where, db)


def test_the_job_rolls_back_and_commits_with_the_applications_transaction(target):
    """Each transaction starts with enqueue(): a SQLAlchemy Connection or Session not in
    a transaction yet begins one there, so that its commit() commits the job alone too."""
    with target.application() as app:
        lost = prefork.enqueue(app.handle, "ledger", key="lost")
        app.add_order("lost")
        app.rollback()
        assert target.db.row(lost) is None and target.orders() == []

        alone = prefork.enqueue(app.handle, "ledger", key="alone")
        app.commit()
        assert target.db.row(alone)["status"] == "ready"

        with_row = prefork.enqueue(app.handle, "ledger", {"order": 2}, key="with-row")
        assert prefork.enqueue(app.handle, "ledger", {"order": 2}, key="with-row") == with_row
        app.add_order("with-row")
        assert target.db.row(with_row) is None, "visible before the application's commit"
        app.commit()
    assert target.db.row(with_row)["status"] == "ready"
    assert target.orders() == ["with-row"] and target.job_count() == 2

    for _ in range(2):
        result = run_cli("work", "--once", "--app", "ledger_app", dsn=target.dsn)
        assert result.returncode == 0, result.stderr
    for key, job_id in (("alone", alone), ("with-row", with_row)):
        assert target.db.row(job_id)["status"] == "done"
        assert target.db.scalar("SELECT job_id FROM ledger WHERE idempotency_key = %s",
                                (key,)) == job_id


def test_a_cancel_and_a_concurrency_key_ride_the_applications_transaction(target):
    with target.application() as app:
        job_id = prefork.enqueue(app.handle, "ledger", key="to-cancel",
                                 concurrency_key="account-7")
        app.commit()
        assert target.db.row(job_id)["concurrency_key"] == "account-7"
        report = prefork.cancel(app.handle, [job_id, 987654321])
        assert report == prefork.CancelReport([job_id], [], [], [987654321])
        app.rollback()
        assert target.db.row(job_id)["status"] == "ready"
        assert prefork.cancel(app.handle, job_id).cancelled == [job_id]
        app.add_order("cancelled")
        assert target.db.row(job_id)["status"] == "ready", "visible before the commit"
        app.commit()
        assert prefork.cancel(app.handle, job_id).finished == [job_id]
        app.commit()
    assert target.db.row(job_id)["status"] == "cancelled" and target.orders() == ["cancelled"]


def test_a_workflow_and_a_batch_ride_the_applications_transaction(target):
    """Every driver and holder: a workflow rolls back and commits with the application's
    rows; a batch opened, added to and closed; a waiting step cancelled with it."""
    flow = prefork.chain(prefork.job("ledger"), prefork.group([prefork.job("ledger")] * 3,
                                                              then=prefork.job("ledger")))
    with target.application() as app:
        prefork.enqueue_workflow(app.handle, flow, key="order-1")
        app.rollback()
        assert target.job_count() == 0
        enqueued = prefork.enqueue_workflow(app.handle, flow, key="order-1")
        app.add_order("order-1")
        app.commit()
        assert prefork.enqueue_workflow(app.handle, flow, key="order-1") == enqueued
        batch = prefork.open_batch(app.handle, on_complete=prefork.job("ledger"))
        assert len(batch.add(app.handle, prefork.job("ledger"), flow)) == 6
        batch.close(app.handle)
        report = prefork.cancel(app.handle, enqueued.job_ids[-1])
        app.commit()
        assert report.cancelled == [enqueued.job_ids[-1]]
        assert prefork.workflow_progress(app.handle, batch.id)[3:] == (2, 0, 0, 0, False)
        app.commit()
    states = [target.db.row(job_id)["status"] for job_id in enqueued.job_ids]
    assert states == ["ready", "waiting", "waiting", "waiting", "cancelled"]
    assert target.orders() == ["order-1"] and target.job_count() == 5 + 1 + 6


def test_notify_wakes_an_idle_supervisor_at_once(target, tmp_path, bell_base):
    """A poll interval of a minute: the job runs within the deadline only if notify()
    on the application's connection rang the supervisor's bell."""
    config = config_module.load({"dsn": target.dsn}, environ={})
    with closing(open_store(config)) as queue_store:
        bell_dir = Path(bell_directory(queue_store.bell_key))
    with supervisor_starter(tmp_path, target.dsn, "--app", "ledger_app") as start:
        sup = start("--workers", "1", "--poll-interval", "60",
                    env={"XDG_RUNTIME_DIR": str(bell_base)})
        sup.wait_event("worker_ready")
        wait_until((bell_dir / f"{sup.pid}.sock").exists, message="the supervisor's bell")
        with target.application() as app:
            job_id = prefork.enqueue(app.handle, "ledger", key="rung")
            app.commit()
            prefork.notify(app.handle)
        wait_until(lambda: target.db.row(job_id)["status"] == "done", timeout=20,
                   message="the job done before the next poll")
        assert sup.proc.poll() is None


@pytest.fixture(scope="module")
def schemaless_database(mysql_server):
    """A MySQL database without the queue schema (an application's own, say)."""
    with scratch_database("pq_adapters_empty") as name:
        yield name


def table_count(driver, where):
    if driver == "sqlite3":
        with closing(sqlite3.connect(where)) as conn:
            return conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    with closing(admin_connection()) as admin, admin.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s",
                       (where,))
        return cursor.fetchone()[0]


@pytest.mark.parametrize(("driver", "holder"), VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_a_database_without_the_queue_schema_is_named(driver, holder, request, tmp_path):
    if driver == "sqlite3":
        where = str(tmp_path / "app.db")
        sqlite3.connect(where).close()
        expected = f"no queue database at sqlite:///{where}: start the supervisor or run migrate"
    else:
        where = request.getfixturevalue("schemaless_database")
        expected = (f"no queue database at mysql://{SERVER['user']}@{SERVER['host']}:"
                    f"{SERVER['port']}/{where}: run migrate (as an account allowed to CREATE)")
    with application(driver, holder, where) as app:
        with pytest.raises(NoQueueDatabase) as raised:
            prefork.enqueue(app.handle, "noop")
        app.rollback()
        with pytest.raises(NoQueueDatabase) as cancelling:
            prefork.cancel(app.handle, [1])
        app.rollback()
    assert str(raised.value) == f"{expected}, or set the DSN"
    assert str(cancelling.value) == str(raised.value)
    assert table_count(driver, where) == 0


@pytest.fixture
def sqlite_engine(tmp_path):
    engine = sqlalchemy.create_engine(f"sqlite+pysqlite:///{tmp_path / 'app.db'}")
    yield engine
    engine.dispose()


def test_anything_else_is_refused_in_one_line_naming_what_is_accepted(sqlite_engine, tmp_path):
    with closing(sqlite3.connect(tmp_path / "app.db")) as conn:
        refused = {"builtins.object": object(),
                   "sqlite3.Cursor": conn.cursor(),                    # not a connection
                   "sqlalchemy.engine.base.Engine": sqlite_engine,     # holds no transaction
                   "sqlalchemy.orm.session.sessionmaker": sessionmaker(sqlite_engine)}
        for name, value in refused.items():
            for call, function, args in (("prefork.enqueue()", prefork.enqueue, ("noop",)),
                                         ("prefork.cancel()", prefork.cancel, ([1],)),
                                         ("prefork.notify()", prefork.notify, ())):
                with pytest.raises(TypeError) as raised:
                    function(value, *args)
                assert str(raised.value) == f"{call} {ACCEPTED}{name}"
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
