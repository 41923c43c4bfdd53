"""The MySQL 8 / MariaDB 10.6+ store, through PyMySQL: the job life cycle. Its SQL
lives here; the schema's and the operator tables' in mysql_schema.py and mysql_ops.py.

Every queue session runs at READ COMMITTED (no gap locks for SKIP LOCKED
scans), in UTC, with short lock waits so that a stuck lock fails a
statement in seconds instead of hanging a worker.
"""
import json
import random
import secrets
import time
from contextlib import contextmanager

import pymysql

from ...errors import LeaseLost
from ...retry import hand_back_decision
from ..contract import CLAIMED_COLUMNS, Store, claimed_job, queue_figures
from .operations import MySQLOperations
from .schema import MySQLSchema
from .session import DEADLOCK_CODES, connect, error_code, micros, parse_dsn

CONTENTION_RETRIES = 5

# --- named queries -----------------------------------------------------------

# Insert one job; on a duplicate (queue, key) make LAST_INSERT_ID() the
# existing row's id, so the caller gets that id and no second row.
ENQUEUE = (
    "INSERT INTO prefork_jobs (queue, job_type, payload, idempotency_key, priority,"
    " max_attempts, available_at, created_at, updated_at)"
    " VALUES (%s, %s, %s, %s, %s, %s,"
    " COALESCE(%s, UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
    " ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)")

# The bulk form: PyMySQL's executemany turns it into one multi-row INSERT;
# a no-op update on duplicates makes the row count the number of new jobs.
ENQUEUE_MANY = ENQUEUE.replace("id = LAST_INSERT_ID(id)", "id = id")

# A paused queue is claimed by nobody (its parameter: the queue again). The
# subquery is not a locking read: FOR UPDATE applies to the outer table only.
UNPAUSED = " AND NOT EXISTS (SELECT 1 FROM prefork_queue_states WHERE queue = %s AND paused = 1)"

# The next ready job of one queue, read in index order and locked, skipping
# rows other claimers hold. FORCE INDEX: the optimizer must never choose a
# filesort here, which would lock every row it scans.
CLAIM_SELECT = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND available_at <= UTC_TIMESTAMP(6)" + UNPAUSED +
    " ORDER BY priority, available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED")

# The fence shared by complete, fail and extend: our token, still reserved,
# lease not yet over. Zero rows matched means the lease was lost. Statements
# on one job by id force the primary key: through the lease index they would
# lock other workers' reserved rows and deadlock with them.
LEASE_FENCE = ("id = %s AND status = 'reserved' AND lease_token = %s"
               " AND lease_until > UTC_TIMESTAMP(6)")

# The token stays on a done row: it tells whoever completes a group of jobs
# that one of them was already written with that same lease (by the parent,
# for a child busy with a slow job).
COMPLETE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_until = NULL,"
    " finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6) WHERE " + LEASE_FENCE)


def _id_table(variable, alias):
    """A user variable's JSON array of job ids, as a table to join the jobs to."""
    return f"JSON_TABLE({variable}, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) AS {alias}"


# A claim is one round trip and one commit for a whole batch: a multi-statement
# script that locks the next jobs, reserves them, and reads them back after
# the commit. Each job gets its own lease token, LEFT(SHA2(secret + id), 32):
# unpredictable without the claim's random 16-byte secret, unique per job.
CLAIMED = _id_table("@prefork_claimed", "claimed")

CLAIM_STEPS = (
    "SELECT JSON_ARRAYAGG(id) INTO @prefork_claimed FROM ("
    + CLAIM_SELECT.replace("LIMIT 1", "LIMIT %s") + ") AS next_jobs;"
    " UPDATE prefork_jobs AS j FORCE INDEX (PRIMARY) JOIN " + CLAIMED + " ON j.id = claimed.id"
    " SET j.status = 'reserved', j.attempts = j.attempts + 1,"
    " j.lease_token = LEFT(SHA2(CONCAT(%s, j.id), 256), 32),"
    " j.lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND, j.locked_by = %s,"
    " j.process_id = %s, j.updated_at = UTC_TIMESTAMP(6);")

# Read back after the commit, in claim order; attempts - 1 so that
# claimed_job() sees each row as it was before the reservation. Then the
# completion's row count (complete-and-claim), as its own result.
CLAIM_READ_BACK = (
    "SELECT " + ", ".join("j." + column.strip() for column in CLAIMED_COLUMNS.split(","))
    .replace("j.attempts,", "j.attempts - 1,", 1) + ", j.lease_token"
    " FROM " + CLAIMED + " JOIN prefork_jobs AS j ON j.id = claimed.id"
    " ORDER BY j.priority, j.available_at, j.id; SELECT @prefork_completed")

CLAIM = ("SET @prefork_claimed = NULL, @prefork_completed = NULL; START TRANSACTION; "
         + CLAIM_STEPS + " COMMIT; " + CLAIM_READ_BACK)

# How many jobs are ready (up to a limit), per queue, reading the claim index
# without locking: the supervisor's one look for all its idle children.
READY_COUNT_PART = (
    "(SELECT 1 FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status = 'ready' AND queue = %s AND available_at <= UTC_TIMESTAMP(6)" + UNPAUSED +
    " ORDER BY priority, available_at, id LIMIT %s)")

# Finish a group of jobs (a batch's) in one transaction: lock, in id order,
# those whose lease is ours and live or that are already done with our token,
# note their ids, mark the reserved ones done. FORCE INDEX (PRIMARY) on the
# join too: on a big table the optimizer would rather read every reserved row
# through the lease index, locking other workers' jobs. The caller learns which were
# completed from @prefork_completed (a JSON array, or NULL).
COMPLETE_GROUP = (
    "SELECT JSON_ARRAYAGG(id) INTO @prefork_completed FROM prefork_jobs FORCE INDEX (PRIMARY)"
    " WHERE (status = 'done' OR (status = 'reserved' AND lease_until > UTC_TIMESTAMP(6)))"
    " AND ({pairs}) FOR UPDATE;"
    " UPDATE prefork_jobs AS j FORCE INDEX (PRIMARY) JOIN "
    + _id_table("@prefork_completed", "completed") + " ON j.id = completed.id SET j.status = 'done', j.lease_until = NULL,"
    " j.finished_at = UTC_TIMESTAMP(6), j.updated_at = UTC_TIMESTAMP(6)"
    " WHERE j.status = 'reserved';")

LEASE_PAIR = "(id = %s AND lease_token = %s)"

COMPLETE_MANY = ("SET @prefork_completed = NULL; START TRANSACTION; " + COMPLETE_GROUP +
                 " COMMIT; SELECT @prefork_completed")

# Finish a group of jobs and claim the next ones in one round trip and one commit.
COMPLETE_AND_CLAIM = (
    "SET @prefork_claimed = NULL, @prefork_completed = NULL; START TRANSACTION; " + COMPLETE_GROUP
    + " " + CLAIM_STEPS + " COMMIT; " + CLAIM_READ_BACK)

LOCK_FOR_COMPLETION = (f"SELECT 1 FROM prefork_jobs FORCE INDEX (PRIMARY) WHERE {LEASE_FENCE}"
                       " FOR UPDATE")

FAIL = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = %s, last_error = %s, lease_token = NULL,"
    " lease_until = NULL, available_at = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " finished_at = IF(%s = 'dead', UTC_TIMESTAMP(6), NULL), updated_at = UTC_TIMESTAMP(6)"
    " WHERE " + LEASE_FENCE)

# Release needs no live lease: giving back an unstarted claim is always
# safe while the token still matches (nobody else took the job).
RELEASE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'ready', attempts = attempts - 1, lease_token = NULL,"
    " lease_until = NULL, locked_by = NULL, updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s")

EXTEND = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " updated_at = UTC_TIMESTAMP(6) WHERE " + LEASE_FENCE)

EXTEND_MANY = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET lease_until = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " updated_at = UTC_TIMESTAMP(6) WHERE status = 'reserved'"
    " AND lease_until > UTC_TIMESTAMP(6) AND ({pairs})")

# Of some leases, those whose job is done under that same lease (a child may
# have written their completions while the parent extended them).
COUNT_DONE = ("SELECT COUNT(*) FROM prefork_jobs FORCE INDEX (PRIMARY)"
              " WHERE status = 'done' AND ({pairs})")

# The dead worker's job, locked by its token (no lease check: the token
# proves nobody else took it).
LOCK_HELD = ("SELECT attempts, max_attempts, crashes FROM prefork_jobs FORCE INDEX (PRIMARY)"
             " WHERE id = %s AND status = 'reserved' AND lease_token = %s FOR UPDATE")

HAND_BACK = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = %s, attempts = attempts - %s, crashes = crashes + %s,"
    " last_error = %s, lease_token = NULL, lease_until = NULL,"
    " available_at = UTC_TIMESTAMP(6) + INTERVAL %s MICROSECOND,"
    " finished_at = IF(%s = 'dead', UTC_TIMESTAMP(6), NULL), updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s")

# Expired leases, oldest first, reading the lease index; SKIP LOCKED so a
# worker finishing its job right now is never waited on.
EXPIRED_SELECT = (
    "SELECT id FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_lease)"
    " WHERE status = 'reserved' AND lease_until <= UTC_TIMESTAMP(6)"
    " ORDER BY lease_until LIMIT %s FOR UPDATE SKIP LOCKED")

RECOVER = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY)"
    " SET status = IF(attempts >= max_attempts, 'dead', 'ready'),"
    " last_error = 'lease expired', lease_token = NULL, lease_until = NULL,"
    " available_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6),"
    " finished_at = IF(attempts >= max_attempts, UTC_TIMESTAMP(6), NULL)"
    " WHERE id IN ({ids}) AND status = 'reserved' AND lease_until <= UTC_TIMESTAMP(6)")

GET = (
    "SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts,"
    " max_attempts, crashes, available_at, lease_until, locked_by, last_error, created_at,"
    " updated_at, finished_at FROM prefork_jobs WHERE id = %s")

DEAD = (
    "SELECT id, queue, job_type, attempts, last_error, finished_at FROM prefork_jobs"
    " WHERE status = 'dead' {queue_filter} ORDER BY finished_at DESC, id DESC LIMIT %s")

RETRY_DEAD = (
    "UPDATE prefork_jobs SET status = 'ready', attempts = 0, crashes = 0, lease_token = NULL,"
    " lease_until = NULL, finished_at = NULL, available_at = UTC_TIMESTAMP(6),"
    " updated_at = UTC_TIMESTAMP(6) WHERE status = 'dead' {filters}")

COUNTS = "SELECT status, COUNT(*) FROM prefork_jobs {queue_filter} GROUP BY status"

# Depth of some queues for the metrics: only the claim index's ranges of the
# live statuses (its first column), so the millions of done rows are never read.
QUEUE_STATS = (
    "SELECT queue, status, COUNT(*), SUM(available_at <= UTC_TIMESTAMP(6)),"
    " TIMESTAMPDIFF(MICROSECOND, MIN(IF(available_at <= UTC_TIMESTAMP(6), available_at, NULL)),"
    " UTC_TIMESTAMP(6)) / 1e6"
    " FROM prefork_jobs FORCE INDEX (ix_prefork_jobs_claim)"
    " WHERE status IN ('ready', 'reserved', 'dead') AND queue IN ({queues})"
    " GROUP BY queue, status")


class MySQLStore(MySQLSchema, MySQLOperations, Store):
    def __init__(self, config):
        self.dsn_args = parse_dsn(config.dsn)
        self.bell_key = _bell_key(self.dsn_args["database"])
        self.config = config
        self.conn = connect(config, self.dsn_args, config.password())

    def close(self):
        try:
            self.conn.close()
        except pymysql.err.Error:
            pass

    def abandon(self):
        # Closing our copy of the socket's file descriptor leaves the parent's
        # session intact; conn.close() would send COM_QUIT on the shared socket.
        sock = getattr(self.conn, "_sock", None)
        if sock is not None:
            sock.close()

    def connection_id(self):
        return self._one("SELECT CONNECTION_ID()")[0]

    def _one(self, sql, args=None):
        with self.conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchone()

    def _rowcount(self, sql, args=None):
        """Run one autocommitted statement; its affected row count."""
        def execute():
            with self.conn.cursor() as cursor:
                return cursor.execute(sql, args)
        return self._retry_contention(execute)

    def _retry_contention(self, action):
        """Run action(). A deadlock or lock-wait timeout is contention, not failure:
        roll back and retry after a short random pause, so the parties do not
        collide again. Only for whole transactions or autocommitted statements."""
        for attempt in range(CONTENTION_RETRIES):
            try:
                return action()
            except pymysql.err.OperationalError as exc:
                self._rollback_quietly()
                if error_code(exc) not in DEADLOCK_CODES or attempt == CONTENTION_RETRIES - 1:
                    raise
                time.sleep(random.uniform(0.005, 0.05) * (attempt + 1))

    @contextmanager
    def _transaction(self):
        self.conn.begin()
        try:
            with self.conn.cursor() as cursor:
                yield cursor
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    # -- producing --------------------------------------------------------------

    def enqueue(self, new_job):
        with self.conn.cursor() as cursor:
            job_id = enqueue_on(cursor, new_job)
        self.ring([new_job])
        return job_id

    def enqueue_many(self, new_jobs):
        rows = [_enqueue_args(job) for job in new_jobs]
        if not rows:
            return 0
        with self._transaction() as cursor:
            added = cursor.executemany(ENQUEUE_MANY, rows)
        self.ring(new_jobs)
        return added

    # -- life cycle ---------------------------------------------------------------

    def claim(self, queues, worker, lease_seconds, limit=1, process_id=None):
        jobs = []
        for queue in queues:
            _, claimed = self._run_claim(CLAIM, (), queue, limit - len(jobs),
                                         (worker, lease_seconds, process_id))
            jobs += claimed
            if len(jobs) >= limit:
                break
        return jobs

    def complete_and_claim(self, leases, queues, worker, lease_seconds, process_id=None, limit=1):
        claimant = (worker, lease_seconds, process_id)
        completed, jobs = self._run_claim(_for_leases(COMPLETE_AND_CLAIM, leases),
                                          _flat(leases), queues[0], limit, claimant)
        if not jobs and len(queues) > 1:
            jobs = self.claim(queues[1:], worker, lease_seconds, limit, process_id)
        return completed, jobs

    def complete_many(self, leases):
        if not leases:
            return set()
        results = self._retry_contention(
            lambda: self._script_results(_for_leases(COMPLETE_MANY, leases), _flat(leases)))
        return _completed_ids(results[-1][0][0])

    def _run_claim(self, script, leading_args, queue, limit, claimant):
        """Run a claim script for up to `limit` jobs of one queue; returns
        (ids of the jobs it completed, [Job])."""
        worker, lease_seconds, process_id = claimant
        args = leading_args + (queue, queue, limit, secrets.token_hex(16),
                               micros(lease_seconds), worker, process_id)
        rows, ((completed,),) = self._retry_contention(lambda: self._script_results(script, args))
        return _completed_ids(completed), [claimed_job(row[:-1], row[-1], self) for row in rows]

    def _script_results(self, script, args):
        """Run a multi-statement script; the rows of the statements that return any
        (the reads), as a list of lists."""
        results = []
        with self.conn.cursor() as cursor:
            cursor.execute(script, args)
            while True:
                if cursor.description is not None:
                    results.append(cursor.fetchall())
                if not cursor.nextset():
                    return results

    def _rollback_quietly(self):
        # A failed statement stops the script where it is, maybe inside its
        # transaction; end that before anything else is sent.
        try:
            self.conn.rollback()
        except pymysql.err.Error:
            pass

    def ready_count(self, queues, limit):
        parts = " UNION ALL ".join([READY_COUNT_PART] * len(queues))
        args = [value for queue in queues for value in (queue, queue, limit)]
        return self._one(f"SELECT COUNT(*) FROM ({parts}) AS ready", args)[0]

    @contextmanager
    def completing(self, job):
        with self._transaction() as cursor:
            if cursor.execute(LOCK_FOR_COMPLETION, (job.id, job.lease_token)) != 1:
                raise LeaseLost(f"job {job.id}: lease lost before completion")
            yield cursor
            # Fenced again: the lease may have run out while the effect was written.
            if cursor.execute(COMPLETE, (job.id, job.lease_token)) != 1:
                raise LeaseLost(f"job {job.id}: lease lost during completion")
        job.finished = True

    def fail(self, job, error, decision):
        status = "dead" if decision.dead else "ready"
        return self._rowcount(FAIL, (status, error[:500], micros(decision.delay), status,
                                     job.id, job.lease_token)) == 1

    def release(self, job):
        return self._rowcount(RELEASE, (job.id, job.lease_token)) == 1

    def extend(self, job, lease_seconds):
        return self._rowcount(EXTEND, (micros(lease_seconds), job.id, job.lease_token)) == 1

    def extend_many(self, leases, lease_seconds):
        if not leases:
            return 0
        extended = self._rowcount(_for_leases(EXTEND_MANY, leases),
                                  (micros(lease_seconds),) + _flat(leases))
        if extended == len(leases):
            return extended
        return extended + self._one(_for_leases(COUNT_DONE, leases), _flat(leases))[0]

    def hand_back(self, job_id, lease_token, cause, policy, max_crashes, charge=True):
        with self._transaction() as cursor:
            if cursor.execute(LOCK_HELD, (job_id, lease_token)) != 1:
                return None
            attempts, max_attempts, crashes = cursor.fetchone()
            status, delay, error = hand_back_decision(attempts, max_attempts, crashes, cause,
                                                     policy, max_crashes, charge)
            cursor.execute(HAND_BACK, (status, 0 if charge else 1, 1 if charge else 0, error[:500],
                                       micros(delay), status, job_id))
            return status

    def recover_expired(self, limit=100):
        with self._transaction() as cursor:
            cursor.execute(EXPIRED_SELECT, (limit,))
            ids = [row[0] for row in cursor.fetchall()]
            if not ids:
                return 0
            return cursor.execute(RECOVER.format(ids=", ".join(["%s"] * len(ids))), ids)

    # -- inspection -----------------------------------------------------------------

    def get(self, job_id):
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(GET, (job_id,))
            return cursor.fetchone()

    def dead_jobs(self, queue=None, limit=100):
        queue_filter, args = ("AND queue = %s", [queue]) if queue else ("", [])
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(DEAD.format(queue_filter=queue_filter), args + [limit])
            return cursor.fetchall()

    def retry_dead(self, job_ids=None, queue=None):
        filters, args = [], []
        if job_ids is not None:
            if not job_ids:
                return 0
            filters.append("AND id IN (" + ", ".join(["%s"] * len(job_ids)) + ")")
            args.extend(job_ids)
        if queue:
            filters.append("AND queue = %s")
            args.append(queue)
        return self._rowcount(RETRY_DEAD.format(filters=" ".join(filters)), args)

    def counts(self, queue=None):
        queue_filter, args = ("WHERE queue = %s", (queue,)) if queue else ("", None)
        with self.conn.cursor() as cursor:
            cursor.execute(COUNTS.format(queue_filter=queue_filter), args)
            return {status: count for status, count in cursor.fetchall()}

    def queue_stats(self, queues):
        with self.conn.cursor() as cursor:
            cursor.execute(QUEUE_STATS.format(queues=", ".join(["%s"] * len(queues))), list(queues))
            return queue_figures(queues, cursor.fetchall())


def _for_leases(script, leases):
    return script.replace("{pairs}", " OR ".join([LEASE_PAIR] * len(leases)))


def _flat(leases):
    return tuple(value for pair in leases for value in pair)


def _completed_ids(json_ids):
    return set(json.loads(json_ids)) if json_ids else set()


def _enqueue_args(new_job):
    return (new_job.queue, new_job.type, new_job.payload_text, new_job.key, new_job.priority,
            new_job.max_attempts, new_job.run_at, micros(new_job.delay))


def enqueue_on(cursor, new_job):
    """Insert on the caller's cursor, inside the caller's transaction; never commits."""
    cursor.execute(ENQUEUE, _enqueue_args(new_job))
    return cursor.lastrowid


def _bell_key(database):
    return f"mysql/{database}"   # what names this database for same-host wake-ups


def bell_key_of(conn):
    """The bell key of the database an application's PyMySQL connection uses."""
    database = conn.db.decode("utf-8") if isinstance(conn.db, bytes) else conn.db
    return _bell_key(database)
