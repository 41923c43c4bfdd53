"""The one-job enqueue as a producer in a loop runs it: the wake-up still follows the
commit, and the doorbell's kept listing of who listens still reaches a supervisor
whose bell came after it (and forgets one that went)."""
import os
import select
import socket
import sqlite3
import threading
import time
from contextlib import closing

import prefork
from conftest import admin_connection, wait_until

from prefork import config as config_module
from prefork.wakeups import doorbell
from prefork.wakeups.doorbell import Doorbell

RINGS = 20


def _count_reader(db):
    """A function that counts the queue's jobs on a connection of its own (made in
    the thread that uses it), as a supervisor's read after a ring would."""
    if db.backend == "mysql":
        conn = admin_connection(database=db.database, autocommit=True)
    else:
        conn = sqlite3.connect(db.path, isolation_level=None, timeout=10)

    def count():
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM prefork_jobs WHERE queue = 'ring-order'")
        return cursor.fetchone()[0]
    return conn, count


def test_the_ring_follows_the_commit(backend, queue_dsn, db, bell_base):
    """A listener that reads the database the moment its bell rings finds every job
    rung for: a ring sent before its commit would be read before the commit's flush."""
    config = config_module.load({"dsn": queue_dsn}, environ={})
    seen = []
    with prefork.Client(config=config) as client:
        client.enqueue("noop", queue="warm-up")   # the connection and the bell key ready
        bell = Doorbell(client._store.bell_key)
        ready = threading.Event()

        def listen():
            conn, count = _count_reader(db)
            with closing(conn):
                ready.set()
                # Until the last job's ring: a ring is best effort (a datagram a full
                # socket drops; the poll covers it), so some may never come.
                while not seen or seen[-1] < RINGS:
                    if select.select([bell.sock], [], [], 30)[0] == []:
                        return
                    # The rings first, then the count: every ring taken was sent
                    # after its commit, so the count must include its job.
                    rung = sum(bell.rings().values())
                    seen.extend([count()] * rung)

        listener = threading.Thread(target=listen)
        listener.start()
        try:
            ready.wait(10)
            for _ in range(RINGS):
                client.enqueue("noop", queue="ring-order")
            listener.join(60)
        finally:
            bell.close()
    # The n-th ring read (from 1) found at least n jobs committed: had a ring gone
    # before its commit, some ring would find fewer jobs than rings read so far.
    assert len(seen) >= RINGS // 2 and all(count >= n for n, count in enumerate(seen, 1)), seen


def test_a_bell_made_after_the_listing_is_rung_at_once(bell_base):
    """The listing is kept while the directory is unchanged: a supervisor that starts
    changes it, and the next ring reaches it."""
    key = "test/listing-new-bell"
    first = Doorbell(key)
    try:
        time.sleep(doorbell.QUIET_NS / 1e9 + 0.2)   # left alone: its listing is kept
        doorbell.ring(key, {"mail": 1})
        assert wait_until(first.rings, message="the first bell's ring") == {"mail": 1}
        second = _OtherBell(key)
        try:
            doorbell.ring(key, {"mail": 2})
            assert wait_until(second.rings, message="the new bell's ring") == {"mail": 2}
            assert wait_until(first.rings, message="the first bell's ring") == {"mail": 2}
        finally:
            second.close()
        doorbell.ring(key, {"mail": 3})   # the stopped bell is gone from the listing
        assert wait_until(first.rings, message="the first bell's ring") == {"mail": 3}
    finally:
        first.close()


def test_a_bell_made_where_there_was_no_directory_is_rung_at_once(bell_base):
    """A producer on a host where no supervisor ran yet remembers that nobody listens,
    until the directory that was missing is made: the first supervisor's bell."""
    key = "test/listing-no-directory"
    time.sleep(doorbell.QUIET_NS / 1e9 + 0.2)   # the base left alone: "nobody" is kept
    doorbell.ring(key, {"mail": 1})
    bell = Doorbell(key)
    try:
        doorbell.ring(key, {"mail": 2})
        assert wait_until(bell.rings, message="the first bell's ring") == {"mail": 2}
    finally:
        bell.close()


def test_a_directory_replaced_after_the_listing_gets_no_ring(bell_base):
    """A kept listing is used only for the directory it was made of: one put in its
    place (open to all, as another local user could leave it) is checked, and refused."""
    key = "test/listing-replaced"
    ours = Doorbell(key)
    time.sleep(doorbell.QUIET_NS / 1e9 + 0.2)   # left alone: its listing is kept
    doorbell.ring(key, {"payroll": 1})
    assert wait_until(ours.rings, message="our bell's ring") == {"payroll": 1}
    ours.close()
    directory = doorbell.bell_directory(key)
    os.rmdir(directory)
    os.mkdir(directory)
    os.chmod(directory, 0o777)
    theirs = _OtherBell(key, os.path.basename(ours.path))   # where our bell was
    try:
        doorbell.ring(key, {"payroll": 2})
        time.sleep(0.2)
        assert theirs.rings() == {}
    finally:
        theirs.close()


class _OtherBell(Doorbell):
    """A Doorbell as another supervisor's (pid) would be: Doorbell names its socket
    after our pid, and a second one would take the first one's place."""

    def __init__(self, key, name="other.sock"):
        self.path = os.path.join(doorbell.bell_directory(key), name)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
