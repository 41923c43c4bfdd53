"""SQLite under a real supervisor on a real, small filesystem (a 1 MiB tmpfs, mounted
for the test and unmounted after it; root only): a full disk, and -wal/-shm files
replaced under running processes.

What a test proves is read from outside: the jobs' rows, the supervisor's JSON log,
the -wal file's inode, and the children's open files in /proc/PID/fd."""
import json
import os
import sqlite3
import subprocess
import uuid
from contextlib import closing, contextmanager

import pytest
from conftest import run_cli, wait_until
from harness import supervisor_starter

from prefork import config as config_module
from prefork.store.sqlite.store import SQLiteStore

APP = "--app", "supervised_app"
SIDE_FILES = ("-wal", "-shm")
TMPFS_SIZE = "1m"


@pytest.fixture
def small_disk(tmp_path):
    """A directory on a fresh 1 MiB tmpfs, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", "tmpfs",
                    str(mount_point)], check=True, timeout=30)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


@pytest.fixture
def queue(small_disk):
    """(dsn, database path) of a migrated queue on the small disk."""
    path = small_disk / "queue.db"
    dsn = f"sqlite:///{path}"
    result = run_cli("migrate", dsn=dsn)
    assert result.returncode == 0, result.stderr
    return dsn, path


def fill(folder):
    """Write zeros into folder/fill until the filesystem is full."""
    with open(folder / "fill", "wb", buffering=0) as hog:
        try:
            while True:
                hog.write(b"\0" * 4096)
        except OSError:
            pass


def inode(path):
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def deleted_side_files(pids, database):
    """{pid: [fd target]} of the -wal and -shm files these processes hold deleted."""
    held = {}
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{folder}/{name}")
            except FileNotFoundError:
                continue
            if target.startswith(str(database)) and target.endswith(" (deleted)") and \
                    any(suffix in target for suffix in SIDE_FILES):
                held.setdefault(pid, []).append(target)
    return held


def enqueue(dsn, log):
    """`prefork-queue enqueue` of a tally job (a process of its own, as a producer is)."""
    return run_cli("enqueue", "tally", json.dumps({"log": str(log)}), dsn=dsn)


def enqueued(dsn, log, count):
    results = [enqueue(dsn, log) for _ in range(count)]
    assert all(result.returncode == 0 for result in results), results
    return [int(result.stdout) for result in results]


def all_done(dsn, job_ids):
    """Are these jobs done? Read by a connection of its own, closed at once: the test
    holds no lock on the file that would keep another process from deleting files."""
    store = SQLiteStore(config_module.load({"dsn": dsn}, environ={}))
    try:
        rows = [store.get(job_id) for job_id in job_ids]
    finally:
        store.close()
    return all(row is not None and row["status"] == "done" for row in rows)


@contextmanager
def running_supervisor(tmp_path, dsn, log, heartbeat_interval=0.5):
    """A supervisor of two workers that has done one job (the -wal and -shm exist and
    every worker has read); killed at the end."""
    with supervisor_starter(tmp_path, dsn, *APP, "--workers", "2",
                            "--heartbeat-interval", str(heartbeat_interval),
                            "--poll-interval", "0.5") as start:
        sup = start()
        sup.wait_event("worker_ready", count=2, timeout=60)
        first = enqueued(dsn, log, 1)
        wait_until(lambda: all_done(dsn, first), timeout=60, message="the first job done")
        yield sup


def test_after_a_full_disk_the_workers_keep_the_files_and_see_new_jobs(queue, tmp_path):
    """The disk fills (the supervisor's heartbeat fails, it drops its connection and
    reconnects), then is freed: nobody deleted the -wal the idle workers hold, and
    the three jobs enqueued after are done."""
    dsn, database = queue
    log = tmp_path / "tally.log"
    # Heartbeats 5 s apart: one fails on the full disk, the next succeeds well before
    # the supervisor would hold (stop its workers), so the same workers must see the
    # new jobs through the files they already hold.
    with running_supervisor(tmp_path, dsn, log, heartbeat_interval=5) as sup:
        wal_before = inode(f"{database}-wal")
        fill(database.parent)
        assert enqueue(dsn, log).returncode != 0   # the producer sees the full disk
        sup.wait_event("supervisor_db_error", timeout=60)
        os.unlink(database.parent / "fill")
        later = enqueued(dsn, log, 3)
        wait_until(lambda: all_done(dsn, later), timeout=60,
                   message="the three jobs enqueued after the disk was freed done")
        children = [child.pid for child in sup.children()]
        assert len(children) == 2
        assert deleted_side_files([sup.pid, *children], database) == {}
        assert inode(f"{database}-wal") == wal_before, "the -wal was deleted and made anew"
        assert sup.events("sqlite_files_replaced") == []


def claimed_by(database, job_ids):
    """The pids that claimed these jobs (locked_by is host:pid)."""
    with closing(sqlite3.connect(database)) as conn:
        rows = conn.execute("SELECT locked_by FROM prefork_jobs WHERE id IN (%s)"
                            % ", ".join("?" * len(job_ids)), list(job_ids)).fetchall()
    return {int(locked_by.rsplit(":", 1)[1]) for (locked_by,) in rows}


def test_processes_whose_wal_was_replaced_reconnect_and_say_so(queue, tmp_path):
    """The -wal and -shm files removed under a running supervisor (a careless
    clean-up, after a checkpoint: no commit is lost): each process reconnects at its
    next transaction and says so (the parent at its heartbeat, the workers at their
    claim), and the jobs enqueued after are done."""
    dsn, database = queue
    log = tmp_path / "tally.log"
    with running_supervisor(tmp_path, dsn, log) as sup:
        with closing(sqlite3.connect(database)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for suffix in SIDE_FILES:
            os.unlink(f"{database}{suffix}")
        later = enqueued(dsn, log, 3)
        wait_until(lambda: all_done(dsn, later), timeout=60,
                   message="the three jobs enqueued after the files were replaced done")
        sup.wait_event("sqlite_files_replaced", pid=sup.pid, timeout=30)   # at its heartbeat
        claimers = claimed_by(database, later)   # the workers, or their parent (claimer)
        reconnected = {event["pid"]
                       for event in sup.events("sqlite_files_replaced", reopened=True)}
        assert {sup.pid} | claimers <= reconnected, (claimers, reconnected)
        # An idle worker that has not read since reconnects at its next transaction.
        holders = deleted_side_files([sup.pid, *(child.pid for child in sup.children())],
                                     database)
        assert not set(holders) & ({sup.pid} | claimers), holders
