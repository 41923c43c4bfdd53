"""SQLiteSession: the part of the SQLite store every other part builds on. It owns
one connection in the process that opened it, and runs every write as one BEGIN
IMMEDIATE transaction and every read with the same bound on a busy lock.

Each transaction first checks that the database's -wal and -shm files are still
the ones its connection opened (file.side_files(): two stat calls). Another
process that closes the database believing it is the last one deletes them (or
an operator does), and the next one to open it makes new ones; a connection on
the deleted ones reads and writes files nobody else sees, so it is opened again,
and the event `sqlite_reconnected` says so. Not while another connection of this
process still holds the deleted ones: the new one would share its -shm, so the
store refuses to open (a driver error: a worker exits and is replaced)."""
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from typing import Any

from ...jobs import utc_now
from ...events import Event
from ...logs import event
from ..contract import Store
from .file import (
    Params,
    connect,
    decode_times,
    execute_when_free,
    holds_deleted_side_files,
    side_files,
    times,
)
from .queries import BEGIN_WRITE, COMMIT, HAS_MIGRATIONS_TABLE, ROLLBACK

# Connections inherited over a fork inside a transaction of another thread of the
# parent, and abandoned: kept referenced, never finalized in this process (closing
# one needs the mutex that thread held at the fork).
_ABANDONED: list[sqlite3.Connection] = []


class SQLiteSession(Store):
    path: str
    named: str          # the DSN as given, for messages (file.where())
    busy_seconds: float
    owner_pid: int
    conn: sqlite3.Connection | None
    opened_files: tuple[tuple[int, int], ...] | None   # file.side_files() when opened

    def _open(self, create: bool = False) -> sqlite3.Connection:
        if holds_deleted_side_files(self.path):
            self.conn = None
            raise sqlite3.OperationalError(
                f"cannot open {self.path}: another connection of this process uses its "
                "deleted -wal and -shm files (restart the process)")
        conn = self.conn = connect(self.path, self.busy_seconds, create, self.named)
        if side_files(self.path) is None:   # a read makes them
            execute_when_free(conn, HAS_MIGRATIONS_TABLE, (), self.busy_seconds).fetchall()
        self.opened_files = side_files(self.path)
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None or os.getpid() != self.owner_pid:
            raise RuntimeError(f"SQLite store for {self.path} used outside the process that "
                               "opened it (or after close): open one store per process")
        if self.conn.in_transaction or side_files(self.path) == self.opened_files:
            return self.conn
        if self.opened_files is None:   # made since (a new file): ours
            self.opened_files = side_files(self.path)
            return self.conn
        # Checked before each transaction: this store wrote nothing through the deleted
        # files since they went, so closing them copies nothing into the database.
        self.conn.close()
        try:
            conn = self._open()
        except sqlite3.OperationalError:
            event(Event.SQLITE_FILES_REPLACED, path=self.path, reopened=False)
            raise
        event(Event.SQLITE_FILES_REPLACED, path=self.path, reopened=True)
        return conn

    def close(self) -> None:
        if os.getpid() != self.owner_pid:
            self.abandon()
        elif self.conn is not None:
            self.conn.close()
            self.conn = None

    def abandon(self) -> None:
        """In a forked child: close the parent's connection here. SQLite keeps, per
        process and file, a record of the locks its connections hold; the fork's copy
        says the parent's locks are this process's, and a connection the child opens
        while that record lives takes none of its own, so whoever closes the file
        next may believe it is the last one and delete the -wal and -shm the child
        uses. The close does not touch the files: checkpointing or deleting them on
        close needs the exclusive lock, which the parent's shared one (held while its
        connection is open) keeps the child from taking."""
        if self.conn is not None:
            if self.conn.in_transaction:
                _ABANDONED.append(self.conn)
            else:
                self.conn.close()
            self.conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction holding the database's write lock from its first read."""
        conn = self._connection()
        execute_when_free(conn, BEGIN_WRITE, (), self.busy_seconds)
        try:
            with closing(conn.cursor()) as cursor:
                yield cursor
            conn.execute(COMMIT)
        except BaseException:
            if conn.in_transaction:
                conn.execute(ROLLBACK)
            raise

    def _write_one(self, sql: str, params: Mapping[str, Any], **offsets: float) -> int:
        """One statement in its own write transaction; returns its row count.

        The times (now, and now + each offset in seconds) are read once the
        lock is held, so time spent waiting for the lock never shortens a
        lease or lets an expired one through the fence.
        """
        with self._write() as cursor:
            cursor.execute(sql, {**params, **times(utc_now(), **offsets)})
            return cursor.rowcount

    def _read(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """A cursor over a read. WAL readers are rarely kept waiting (while a
        crashed writer's WAL is recovered); they get the same bound as writers."""
        return execute_when_free(self._connection(), sql, params, self.busy_seconds)

    def _read_dicts(self, sql: str, params: Params) -> list[dict[str, Any]]:
        with closing(self._read(sql, params)) as cursor:
            names = [column[0] for column in cursor.description]
            return [decode_times(dict(zip(names, row))) for row in cursor.fetchall()]
