"""The SQLite file itself: its DSN, opening it (WAL, durable commits, a busy
lock retried every few milliseconds), the filesystem it lives on, and the UTC
time stamps stored in it. Used by every part of the SQLite store."""
import logging
import os
import random
import re
import sqlite3
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, unquote

from ...errors import DatabaseUnavailable, NoQueueDatabase, UserError
from ...logs import event
from .queries import DATABASE_FILE, DURABLE_COMMITS, HAS_MIGRATIONS_TABLE, WAL_JOURNAL

DSN_PREFIX = "sqlite:///"
TIME_COLUMNS = ("available_at", "lease_until", "created_at", "updated_at", "finished_at",
                "cancel_requested_at")
SQLITE_BUSY, SQLITE_LOCKED = 5, 6
# SQLite's own busy handler sleeps up to 100 ms between looks at a busy lock,
# so a process that writes again at once keeps winning it and the sleepers
# starve (seconds, under a burst of enqueues). So its handler only covers
# short waits and we look again every few milliseconds.
SQLITE_BUSY_HANDLER_SECONDS = 0.02
BUSY_FIRST_PAUSE, BUSY_LONGEST_PAUSE = 0.001, 0.01   # seconds between retries, before jitter
# Filesystems whose file locking SQLite cannot rely on (see sqlite.org/useovernet.html).
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs",
    "davfs", "fuse.sshfs", "fuse.glusterfs", "fuse.s3fs", "fuse.rclone", "fuse.cephfs"})

SIDE_FILE_SUFFIXES = ("-wal", "-shm")   # WAL mode's files beside the database file

_WARNED: set[Hashable] = set()

# A statement's parameters: named (a mapping) or positional.
Params = Mapping[str, Any] | Sequence[Any]


# --- DSN, time and connection -----------------------------------------------------

def parse_dsn(dsn: str) -> str:
    """sqlite:///relative/path.db or sqlite:////absolute/path.db -> an absolute file path."""
    if not dsn.lower().startswith(DSN_PREFIX):
        raise UserError("bad DSN: use sqlite:///relative/path.db or sqlite:////absolute/path.db")
    path, _, options = dsn[len(DSN_PREFIX):].partition("?")
    path = unquote(path)
    if options:
        raise UserError("bad DSN: sqlite DSNs take no options")
    if not path or path.endswith("/"):
        raise UserError("bad DSN: name the database file, e.g. sqlite:///prefork-queue.db")
    if path == ":memory:" or path.startswith("file:"):
        # Each process would get its own private database: jobs would vanish.
        raise UserError("bad DSN: the queue needs a database file shared by its processes")
    return os.path.abspath(path)


def where(dsn: str, path: str) -> str:
    """The DSN as given, and the file it names when that is relative (to the
    working directory: the usual surprise), for messages."""
    return dsn if dsn[len(DSN_PREFIX):].startswith("/") else f"{dsn} ({path})"


def stamp(moment: datetime) -> str:
    """Naive UTC datetime -> 'YYYY-MM-DD HH:MM:SS.ffffff' (always six fraction digits)."""
    return moment.isoformat(sep=" ", timespec="microseconds")


def times(now: datetime, **offsets: float) -> dict[str, str]:
    """{'now': ..., name: now + seconds, ...} as stored text, for a statement's parameters."""
    stamps = {name: stamp(now + timedelta(seconds=seconds)) for name, seconds in offsets.items()}
    stamps["now"] = stamp(now)
    return stamps


def decode_times(row: dict[str, Any]) -> dict[str, Any]:
    """Turn the stored time text of a job dict into naive UTC datetimes, in place."""
    for name in TIME_COLUMNS:
        if row.get(name) is not None:
            row[name] = datetime.fromisoformat(row[name])
    return row


def run_at_utc(run_at: datetime | str) -> datetime:
    """A job's run_at as naive UTC: aware datetimes are converted, ISO text is parsed."""
    if isinstance(run_at, str):
        run_at = datetime.fromisoformat(run_at)
    if run_at.tzinfo is not None:
        run_at = run_at.astimezone(timezone.utc).replace(tzinfo=None)
    return run_at


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code: int | None = getattr(exc, "sqlite_errorcode", None)   # set by sqlite3 itself
    if code is not None:
        return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)
    return str(exc).startswith(("database is locked", "database table is locked"))


def execute_when_free(conn: sqlite3.Connection, sql: str, params: Params,
                      busy_seconds: float) -> sqlite3.Cursor:
    """Run a statement that needs a lock another connection may hold, retrying
    with short jittered pauses until busy_seconds have passed since the first try."""
    deadline = time.monotonic() + busy_seconds
    pause = BUSY_FIRST_PAUSE
    while True:
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(pause / 2, pause))  # jitter: retriers do not collide again
        pause = min(pause * 2, BUSY_LONGEST_PAUSE)


def connect(path: str, busy_seconds: float, create: bool, named: str) -> sqlite3.Connection:
    """Open the database file in WAL mode. Without `create`, a missing file, or one
    without the queue schema (another application's, say), is refused as
    NoQueueDatabase(named) and left as it was; with it, a missing one is created (0600)."""
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise DatabaseUnavailable(f"cannot open SQLite database {path}: no directory {folder}")
    if not create and not os.path.exists(path):
        raise NoQueueDatabase(named)
    conn = None
    try:
        if create:
            _create_private(path)
        # mode=rw: a file removed since the look above is an error, not a new file.
        # isolation_level=None: the store issues BEGIN/COMMIT itself.
        # check_same_thread=False: one thread uses a store at a time, but
        # another (a test fixture, a supervisor thread) may close it.
        conn = sqlite3.connect(f"file:{quote(path)}?mode={'rwc' if create else 'rw'}", uri=True,
                               timeout=SQLITE_BUSY_HANDLER_SECONDS, isolation_level=None,
                               check_same_thread=False)
        queue_file = create or execute_when_free(conn, HAS_MIGRATIONS_TABLE, (),
                                                 busy_seconds).fetchone() is not None
        if queue_file:
            mode = execute_when_free(conn, WAL_JOURNAL, (), busy_seconds).fetchone()[0]
            conn.execute(DURABLE_COMMITS)
    except (sqlite3.Error, OSError) as exc:
        if conn is not None:
            conn.close()
        reason = exc.strerror if isinstance(exc, OSError) else exc
        raise DatabaseUnavailable(f"cannot open SQLite database {path}: {reason}") from None
    if not queue_file:
        conn.close()
        raise NoQueueDatabase(named)
    if mode.lower() != "wal":
        warn_once(("journal", path), "sqlite_wal_unavailable", path=path, journal_mode=mode)
    return conn


def side_files(path: str) -> tuple[tuple[int, int], ...] | None:
    """Which -wal and -shm files the database has now: their (device, inode), or
    None when either is missing (not in WAL mode, or not yet made). While a
    connection is open they stay the same files: only the last connection to
    close deletes them, so other ones mean this connection's were deleted."""
    try:
        return tuple((stat.st_dev, stat.st_ino) for stat in
                     (os.stat(path + suffix) for suffix in SIDE_FILE_SUFFIXES))
    except FileNotFoundError:
        return None


def holds_deleted_side_files(path: str) -> bool:
    """Does this process hold a deleted -wal or -shm of this database open (Linux's
    /proc/self/fd; False where there is none)? Then another of its connections
    still uses them, and SQLite would give a connection opened now that one's
    -shm (it keeps one per database file and process) beside the new -wal."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return False
    real = os.path.realpath(path)
    deleted = {f"{real}{suffix} (deleted)" for suffix in SIDE_FILE_SUFFIXES}
    for name in names:
        try:
            if os.readlink(f"/proc/self/fd/{name}") in deleted:
                return True
        except OSError:   # closed meanwhile (the listing's own descriptor)
            continue
    return False


def _create_private(path: str) -> None:
    """Create a missing database file 0600, whatever the umask: payloads and command
    output are nobody else's to read. SQLite creates the -wal and -shm files with
    the mode of the database file, so they follow. An existing file keeps its mode."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass


@contextmanager
def queue_schema_named(conn: sqlite3.Connection) -> Iterator[None]:
    """An application's connection to a database without the queue schema: our
    NoQueueDatabase naming its file, not sqlite3's "no such table". Translated
    once the statement failed: nothing is looked up beforehand."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not str(exc).startswith("no such table: prefork_"):
            raise
        file = conn.execute(DATABASE_FILE).fetchone()[2]
        raise NoQueueDatabase(f"{DSN_PREFIX}{file}" if file else "an in-memory database") \
            from None


def split_statements(sql: str) -> Iterator[str]:
    """Split a schema file into statements the way SQLite's own shell does."""
    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement.strip()
            statement = ""


# --- where the file lives -------------------------------------------------------------

def filesystem_type(path: str, mounts_text: str) -> str | None:
    """The type of the filesystem holding `path`, from /proc/mounts text (None if unknown)."""
    best_mount, best_type = None, None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = re.sub(r"\\([0-7]{3})", lambda code: chr(int(code.group(1), 8)), fields[1])
        inside = mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")
        # >=: a later mount on the same point hides the earlier one.
        if inside and (best_mount is None or len(mount_point) >= len(best_mount)):
            best_mount, best_type = mount_point, fields[2]
    return best_type


def network_filesystem(path: str) -> str | None:
    """The network filesystem type holding `path` (e.g. "nfs4"), or None when it is local."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as mounts:
            mounts_text = mounts.read()
    except OSError:  # not Linux: nothing to tell
        return None
    fs_type = filesystem_type(os.path.realpath(os.path.dirname(path)), mounts_text)
    return fs_type if fs_type in NETWORK_FILESYSTEMS else None


def warn_once(key: Hashable, name: str, **fields: Any) -> None:
    """A warning event, once per process (children forked after it stay quiet)."""
    if key not in _WARNED:
        _WARNED.add(key)
        event(name, level=logging.WARNING, **fields)
