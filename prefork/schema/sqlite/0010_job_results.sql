-- As schema/mysql/0010_job_results.sql: every job's result until expires_at (UTC
-- text, NULL: kept as long as its job), and its failed attempts' tracebacks.
ALTER TABLE prefork_task_results ADD COLUMN expires_at TEXT NULL;

CREATE INDEX IF NOT EXISTS ix_prefork_task_results_expiry ON prefork_task_results (expires_at);
