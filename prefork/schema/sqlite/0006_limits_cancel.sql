-- As schema/mysql/0006_limits_cancel.sql: the 'cancelled' state, the limit
-- columns and tables, and pending cancellations. SQLite cannot change a CHECK
-- constraint in place, so the job table is rebuilt (the documented way: new
-- table, copy, drop, rename), keeping every id and the AUTOINCREMENT counter,
-- then its indexes and trigger are made again. The whole migration is one
-- write transaction (store.migrate()).
CREATE TABLE prefork_jobs_new (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  queue           TEXT    NOT NULL,
  job_type        TEXT    NOT NULL,
  payload         TEXT    NOT NULL,
  idempotency_key TEXT    NULL,
  status          TEXT    NOT NULL DEFAULT 'ready'
                  CHECK (status IN ('ready', 'reserved', 'done', 'dead', 'cancelled')),
  priority        INTEGER NOT NULL DEFAULT 0,
  attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts    INTEGER NOT NULL DEFAULT 5,
  available_at    TEXT    NOT NULL,
  lease_until     TEXT    NULL,
  lease_token     TEXT    NULL,
  locked_by       TEXT    NULL,
  crashes         INTEGER NOT NULL DEFAULT 0,
  last_error      TEXT    NULL,
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL,
  finished_at     TEXT    NULL,
  process_id      INTEGER NULL,
  error_history   TEXT    NULL,
  concurrency_key TEXT    NOT NULL DEFAULT '',
  limited         INTEGER NOT NULL DEFAULT 0,
  cancel_requested_at TEXT NULL
);

INSERT INTO prefork_jobs_new (id, queue, job_type, payload, idempotency_key, status, priority,
  attempts, max_attempts, available_at, lease_until, lease_token, locked_by, crashes, last_error,
  created_at, updated_at, finished_at, process_id, error_history)
SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts, max_attempts,
  available_at, lease_until, lease_token, locked_by, crashes, last_error, created_at, updated_at,
  finished_at, process_id, error_history FROM prefork_jobs;

-- The counter of the old table, which may be past the highest id left (pruned
-- rows), goes to the new one. Either may have no counter row yet: the copy may
-- have inserted nothing (an empty or a new file), the old table may never have
-- had a row.
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'prefork_jobs_new', 0
  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'prefork_jobs_new');
UPDATE sqlite_sequence
  SET seq = max(COALESCE(seq, 0),
                COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'prefork_jobs'), 0))
  WHERE name = 'prefork_jobs_new';
DELETE FROM sqlite_sequence WHERE name = 'prefork_jobs';

DROP TABLE prefork_jobs;
ALTER TABLE prefork_jobs_new RENAME TO prefork_jobs;

CREATE UNIQUE INDEX uq_prefork_jobs_queue_key ON prefork_jobs (queue, idempotency_key);
CREATE INDEX ix_prefork_jobs_claim ON prefork_jobs (status, queue, limited, priority, available_at, id);
CREATE INDEX ix_prefork_jobs_lease ON prefork_jobs (status, lease_until);
CREATE INDEX ix_prefork_jobs_finished ON prefork_jobs (status, finished_at);
CREATE INDEX ix_prefork_jobs_status ON prefork_jobs (status, id);
CREATE INDEX ix_prefork_jobs_status_queue ON prefork_jobs (status, queue, id);
CREATE INDEX ix_prefork_jobs_status_type ON prefork_jobs (status, job_type, id);
CREATE INDEX ix_prefork_jobs_key ON prefork_jobs (idempotency_key);
CREATE INDEX ix_prefork_jobs_created ON prefork_jobs (created_at);
CREATE INDEX ix_prefork_jobs_cancel ON prefork_jobs (cancel_requested_at);

CREATE TRIGGER prefork_task_results_with_job AFTER DELETE ON prefork_jobs
BEGIN
  DELETE FROM prefork_task_results WHERE job_id = OLD.id;
END;

CREATE TABLE IF NOT EXISTS prefork_limits (
  job_type      TEXT    NOT NULL PRIMARY KEY,
  concurrency   INTEGER NULL,
  rate_count    INTEGER NULL,
  rate_seconds  INTEGER NULL,
  updated_at    TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS prefork_limit_groups (
  job_type         TEXT NOT NULL,
  concurrency_key  TEXT NOT NULL,
  tokens           REAL NOT NULL,
  refilled_at      TEXT NOT NULL,
  PRIMARY KEY (job_type, concurrency_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_prefork_limit_groups_refilled ON prefork_limit_groups (refilled_at);
