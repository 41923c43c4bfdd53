-- The dashboard: a per-minute rollup that supervisors write, so that no page
-- counts done rows, and the indexes that serve the Jobs page's filters with
-- keyset paging by id (newest first; see prefork/store/job_search.py).

-- One row per (minute, queue, job type, supervisor): the outcomes that
-- supervisor saw its children report in that minute (UTC, truncated, from the
-- supervisor's clock). failed counts every failed attempt, dead those of them
-- that ended dead. A supervisor writes a minute's final counts once the minute
-- is over (and its last, partial one when it stops): one writer per row, so a
-- write repeated after a lost answer changes nothing. The primary key starts
-- with the minute: charts and `prune` read ranges of minutes.
CREATE TABLE IF NOT EXISTS prefork_minutes (
  minute       DATETIME     NOT NULL,
  queue        VARCHAR(64)  NOT NULL,
  job_type     VARCHAR(128) NOT NULL,
  process_id   BIGINT UNSIGNED NOT NULL,    -- prefork_processes.id of the writer
  host         VARCHAR(255) NOT NULL,
  done         INT UNSIGNED NOT NULL DEFAULT 0,
  failed       INT UNSIGNED NOT NULL DEFAULT 0,
  dead         INT UNSIGNED NOT NULL DEFAULT 0,
  run_seconds  DOUBLE       NOT NULL DEFAULT 0,  -- summed over the counted attempts
  PRIMARY KEY (minute, queue, job_type, process_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The Jobs page's filters, each an index whose range after its equalities is
-- in id order (a page is a backward range read, no sort): by state, by state
-- and queue, by state and type; idempotency-key prefixes (a range of keys);
-- created_at, for the id bounds of a time range. One ALTER builds the five in
-- one pass; INPLACE with LOCK=NONE lets workers claim and complete meanwhile
-- (MySQL 8.0/8.4 and MariaDB online DDL). The three state-led ones change
-- with each state change, as the claim index does.
ALTER TABLE prefork_jobs
  ADD INDEX ix_prefork_jobs_status (status, id),
  ADD INDEX ix_prefork_jobs_status_queue (status, queue, id),
  ADD INDEX ix_prefork_jobs_status_type (status, job_type, id),
  ADD INDEX ix_prefork_jobs_key (idempotency_key),
  ADD INDEX ix_prefork_jobs_created (created_at),
  ALGORITHM=INPLACE, LOCK=NONE;
