"""SQLiteSession: the part of the SQLite store every other part builds on. It owns
one connection in the process that opened it, and runs every write as one BEGIN
IMMEDIATE transaction and every read with the same bound on a busy lock."""
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from typing import Any

from ...jobs import utc_now
from ..contract import Store
from .file import Params, decode_times, execute_when_free, times
from .queries import BEGIN_WRITE, COMMIT, ROLLBACK

# Connections inherited over a fork and abandoned: kept referenced so that
# they are never finalized (closed) in a process that did not open them.
_ABANDONED: list[sqlite3.Connection] = []


class SQLiteSession(Store):
    path: str
    busy_seconds: float
    owner_pid: int
    conn: sqlite3.Connection | None

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None or os.getpid() != self.owner_pid:
            raise RuntimeError(f"SQLite store for {self.path} used outside the process that "
                               "opened it (or after close): open one store per process")
        return self.conn

    def close(self) -> None:
        if os.getpid() != self.owner_pid:
            self.abandon()
        elif self.conn is not None:
            self.conn.close()
            self.conn = None

    def abandon(self) -> None:
        if self.conn is not None:
            _ABANDONED.append(self.conn)
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
