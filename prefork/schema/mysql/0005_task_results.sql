-- Django's Tasks framework (prefork.contrib.django): what each attempt of a task
-- left, for get_result(). A successful attempt's row is written in the transaction
-- that marks its job done (return_value: JSON text); a failed attempt's row names
-- the exception's class (its traceback only when the backend's OPTIONS allow it).
-- Plain prefork jobs write nothing here. No foreign key: it would forbid TRUNCATE
-- of prefork_jobs; `prune` and `discard` delete the rows of the jobs they delete.
CREATE TABLE IF NOT EXISTS prefork_task_results (
  id                    BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  job_id                BIGINT UNSIGNED NOT NULL,
  attempt               INT UNSIGNED NOT NULL,
  worker                VARCHAR(255) NOT NULL,     -- host:pid that ran the attempt
  started_at            DATETIME(6)  NOT NULL,
  finished_at           DATETIME(6)  NOT NULL,
  return_value          LONGTEXT     NULL,
  exception_class_path  VARCHAR(255) NULL,
  traceback             MEDIUMTEXT   NULL,
  PRIMARY KEY (id),
  KEY ix_prefork_task_results_job (job_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
