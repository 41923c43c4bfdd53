-- As schema/mysql/0004_dashboard.sql: the per-minute rollup that supervisors
-- write, and the indexes of the Jobs page's filters (keyset paging by id).
CREATE TABLE IF NOT EXISTS prefork_minutes (
  minute       TEXT    NOT NULL,            -- 'YYYY-MM-DD HH:MM:00.000000' UTC
  queue        TEXT    NOT NULL,
  job_type     TEXT    NOT NULL,
  process_id   INTEGER NOT NULL,
  host         TEXT    NOT NULL,
  done         INTEGER NOT NULL DEFAULT 0,
  failed       INTEGER NOT NULL DEFAULT 0,
  dead         INTEGER NOT NULL DEFAULT 0,
  run_seconds  REAL    NOT NULL DEFAULT 0,
  PRIMARY KEY (minute, queue, job_type, process_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS ix_prefork_jobs_status ON prefork_jobs (status, id);
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_status_queue ON prefork_jobs (status, queue, id);
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_status_type ON prefork_jobs (status, job_type, id);
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_key ON prefork_jobs (idempotency_key);
CREATE INDEX IF NOT EXISTS ix_prefork_jobs_created ON prefork_jobs (created_at);
