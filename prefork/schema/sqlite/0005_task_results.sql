-- As schema/mysql/0005_task_results.sql: what each attempt of a Django task left
-- (prefork.contrib.django), read by get_result(). Times are UTC text as in
-- prefork_jobs. The trigger deletes a job's rows with the job (prune, discard),
-- without needing PRAGMA foreign_keys on every connection.
CREATE TABLE IF NOT EXISTS prefork_task_results (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id                INTEGER NOT NULL,
  attempt               INTEGER NOT NULL,
  worker                TEXT    NOT NULL,
  started_at            TEXT    NOT NULL,
  finished_at           TEXT    NOT NULL,
  return_value          TEXT    NULL,
  exception_class_path  TEXT    NULL,
  traceback             TEXT    NULL
);

CREATE INDEX IF NOT EXISTS ix_prefork_task_results_job ON prefork_task_results (job_id, id);

CREATE TRIGGER IF NOT EXISTS prefork_task_results_with_job AFTER DELETE ON prefork_jobs
BEGIN
  DELETE FROM prefork_task_results WHERE job_id = OLD.id;
END;
