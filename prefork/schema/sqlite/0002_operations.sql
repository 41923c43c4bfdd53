-- Operating on one database: the supervisor registry, pausing queues,
-- restart requests, and fast status and pruning (as schema/mysql/0002).

CREATE TABLE IF NOT EXISTS prefork_processes (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  host          TEXT    NOT NULL,
  pid           INTEGER NOT NULL,
  state         TEXT    NOT NULL DEFAULT 'running'
                CHECK (state IN ('running', 'stopped', 'pruned')),
  queues        TEXT    NOT NULL,
  workers       INTEGER NOT NULL,
  version       TEXT    NOT NULL,
  children      TEXT    NULL,               -- JSON: what each child is doing
  started_at    TEXT    NOT NULL,
  heartbeat_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_prefork_processes_state ON prefork_processes (state, heartbeat_at);

-- Which supervisor's child holds a reserved job.
ALTER TABLE prefork_jobs ADD COLUMN process_id INTEGER NULL;

-- Done and dead jobs by age: `status` and `prune`.
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_finished ON prefork_jobs (status, finished_at);

CREATE TABLE IF NOT EXISTS prefork_queue_states (
  queue       TEXT    NOT NULL PRIMARY KEY,
  paused      INTEGER NOT NULL DEFAULT 0,
  updated_at  TEXT    NOT NULL
);

CREATE TABLE IF NOT EXISTS prefork_restarts (
  host          TEXT NOT NULL PRIMARY KEY,
  requested_at  TEXT NOT NULL
);
