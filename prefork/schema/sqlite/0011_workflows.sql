-- As schema/mysql/0011_workflows.sql: the 'waiting' state, each job's place in
-- its workflow, and the workflows. SQLite cannot change a CHECK constraint in
-- place, so the job table is rebuilt as 0006 rebuilt it (new table, copy, drop,
-- rename), keeping every id and the AUTOINCREMENT counter, then its indexes and
-- trigger are made again. The whole migration is one write transaction.
CREATE TABLE prefork_jobs_new (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  queue           TEXT    NOT NULL,
  job_type        TEXT    NOT NULL,
  payload         TEXT    NOT NULL,
  idempotency_key TEXT    NULL,
  status          TEXT    NOT NULL DEFAULT 'ready'
                  CHECK (status IN ('ready', 'reserved', 'done', 'dead', 'cancelled',
                                    'waiting')),
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
  cancel_requested_at TEXT NULL,
  workflow_id     INTEGER NULL,
  workflow_step   INTEGER NULL
);

INSERT INTO prefork_jobs_new (id, queue, job_type, payload, idempotency_key, status, priority,
  attempts, max_attempts, available_at, lease_until, lease_token, locked_by, crashes, last_error,
  created_at, updated_at, finished_at, process_id, error_history, concurrency_key, limited,
  cancel_requested_at)
SELECT id, queue, job_type, payload, idempotency_key, status, priority, attempts, max_attempts,
  available_at, lease_until, lease_token, locked_by, crashes, last_error, created_at, updated_at,
  finished_at, process_id, error_history, concurrency_key, limited, cancel_requested_at
  FROM prefork_jobs;

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
CREATE INDEX ix_prefork_jobs_workflow ON prefork_jobs (workflow_id, workflow_step);

CREATE TRIGGER prefork_task_results_with_job AFTER DELETE ON prefork_jobs
BEGIN
  DELETE FROM prefork_task_results WHERE job_id = OLD.id;
END;

CREATE TABLE IF NOT EXISTS prefork_workflows (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  root_id         INTEGER NULL,
  parent_id       INTEGER NULL,
  parent_step     INTEGER NOT NULL DEFAULT 0,
  kind            TEXT    NOT NULL CHECK (kind IN ('chain', 'group', 'batch')),
  state           TEXT    NOT NULL
                  CHECK (state IN ('waiting', 'running', 'done', 'dead', 'cancelled')),
  policy          TEXT    NOT NULL DEFAULT 'done' CHECK (policy IN ('done', 'ended')),
  on_dead         TEXT    NOT NULL DEFAULT 'wait' CHECK (on_dead IN ('wait', 'cancel')),
  is_open         INTEGER NOT NULL DEFAULT 0,
  current_step    INTEGER NOT NULL DEFAULT 0,
  total           INTEGER NOT NULL DEFAULT 0,
  done            INTEGER NOT NULL DEFAULT 0,
  dead            INTEGER NOT NULL DEFAULT 0,
  cancelled       INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT    NULL,
  created_at      TEXT    NOT NULL,
  updated_at      TEXT    NOT NULL,
  finished_at     TEXT    NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_prefork_workflows_key ON prefork_workflows (idempotency_key);
CREATE INDEX IF NOT EXISTS ix_prefork_workflows_parent ON prefork_workflows (parent_id, parent_step);
CREATE INDEX IF NOT EXISTS ix_prefork_workflows_root
  ON prefork_workflows (root_id, state, finished_at);
