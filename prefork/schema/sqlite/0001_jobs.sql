-- The job table, as in schema/mysql/0001_jobs.sql. One row per job for its
-- whole life; the status column moves ready -> reserved -> done | dead (or
-- back to ready on retry/release).
-- Times are UTC text 'YYYY-MM-DD HH:MM:SS.ffffff' (fixed width, so text order
-- is time order), written by the store from the clock of the one host that
-- may use the file.
CREATE TABLE IF NOT EXISTS prefork_jobs (
  -- AUTOINCREMENT: an id is never reused, even after the newest rows are pruned.
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  queue           TEXT    NOT NULL,
  job_type        TEXT    NOT NULL,
  payload         TEXT    NOT NULL,
  idempotency_key TEXT    NULL,
  status          TEXT    NOT NULL DEFAULT 'ready'
                  CHECK (status IN ('ready', 'reserved', 'done', 'dead')),
  priority        INTEGER NOT NULL DEFAULT 0,
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts    INTEGER NOT NULL DEFAULT 5,
  available_at    TEXT    NOT NULL,
  lease_until     TEXT    NULL,
  lease_token     TEXT    NULL,
  locked_by       TEXT    NULL,                 -- host:pid of the claimer
  crashes         INTEGER NOT NULL DEFAULT 0,   -- workers this job killed
  last_error      TEXT    NULL,
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL,
  finished_at     TEXT    NULL
);

-- Enqueue idempotency: one job per (queue, key); NULL keys never collide.
CREATE UNIQUE INDEX IF NOT EXISTS uq_prefork_jobs_queue_key
  ON prefork_jobs (queue, idempotency_key);

-- The claim reads this range in order: status and queue are equalities, then
-- rows come sorted by priority, available_at, id (no temporary sort).
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_claim
  ON prefork_jobs (status, queue, priority, available_at, id);

-- Lease recovery reads reserved rows whose lease ended, oldest first.
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_lease
  ON prefork_jobs (status, lease_until);
