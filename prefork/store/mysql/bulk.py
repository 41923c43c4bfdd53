"""The bulk enqueue of the MySQL store: jobs go in chunks, one multi-row INSERT
each (bulk_queries.py), all in the caller's transaction. A chunk is bounded in
rows and in payload bytes, so that a statement stays far below the server's
max_allowed_packet (16 MiB by default on MariaDB 10.6+ and MySQL 8; 4 MiB at the
least in practice) even when every byte needs escaping.
"""
from collections.abc import Iterator, Sequence
from typing import Any

import pymysql

from ...jobs import NewJob
from ...limits.rules import NO_KEY
from .bulk_queries import enqueue_rows
from .session import micros

# Rows per statement: beyond a few hundred, a longer statement gains nothing.
CHUNK_ROWS = 500
# Payload bytes per statement (escaped, at most twice that on the wire).
CHUNK_BYTES = 1 << 20


def enqueue_args(new_job: NewJob) -> tuple[Any, ...]:
    """The parameters of one job's row (queries.ENQUEUE's and bulk_queries.ENQUEUE_ROW's)."""
    return (new_job.queue, new_job.type, new_job.payload_text, new_job.key, new_job.priority,
            new_job.max_attempts, new_job.run_at, micros(new_job.delay),
            NO_KEY if new_job.concurrency_key is None else new_job.concurrency_key, new_job.type)


def insert_chunks(cursor: pymysql.cursors.Cursor, new_jobs: Sequence[NewJob]) -> int:
    """Insert the jobs on the caller's cursor, a multi-row INSERT per chunk; how
    many were new (a repeated queue and key adds nothing)."""
    added = 0
    for chunk in chunks(new_jobs):
        args = [value for job in chunk for value in enqueue_args(job)]
        added += cursor.execute(enqueue_rows(len(chunk)), args)
    return added


def chunks(new_jobs: Sequence[NewJob]) -> Iterator[Sequence[NewJob]]:
    """The jobs in order, in runs of at most CHUNK_ROWS rows and about CHUNK_BYTES
    of payload (a bigger payload goes alone)."""
    start, size = 0, 0
    for index, job in enumerate(new_jobs):
        size += len(job.payload_text)
        if index > start and (index - start >= CHUNK_ROWS or size > CHUNK_BYTES):
            yield new_jobs[start:index]
            start, size = index, len(job.payload_text)
    if start < len(new_jobs):
        yield new_jobs[start:]
