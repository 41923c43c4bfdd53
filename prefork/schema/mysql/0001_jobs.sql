-- The job table. One row per job for its whole life; the status column moves
-- ready -> reserved -> done | dead (or back to ready on retry/release).
-- Times are UTC, written from the server's UTC_TIMESTAMP(6) so that hosts
-- with skewed clocks agree on leases.
CREATE TABLE IF NOT EXISTS prefork_jobs (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  queue           VARCHAR(64)  NOT NULL,
  job_type        VARCHAR(128) NOT NULL,
  payload         LONGTEXT     NOT NULL,
  idempotency_key VARCHAR(191) NULL,
  status          ENUM('ready','reserved','done','dead') NOT NULL DEFAULT 'ready',
  priority        SMALLINT     NOT NULL DEFAULT 0,
  attempts        INT UNSIGNED NOT NULL DEFAULT 0,
  max_attempts    INT UNSIGNED NOT NULL DEFAULT 5,
  available_at    DATETIME(6)  NOT NULL,
  lease_until     DATETIME(6)  NULL,
  lease_token     CHAR(32)     CHARACTER SET ascii NULL,
  locked_by       VARCHAR(255) NULL,           -- host:pid of the claimer
  crashes         INT UNSIGNED NOT NULL DEFAULT 0, -- workers this job killed
  last_error      VARCHAR(500) NULL,
  created_at      DATETIME(6)  NOT NULL,
  updated_at      DATETIME(6)  NOT NULL,
  finished_at     DATETIME(6)  NULL,
  PRIMARY KEY (id),
  -- Enqueue idempotency: one job per (queue, key); NULL keys never collide.
  UNIQUE KEY uq_prefork_jobs_queue_key (queue, idempotency_key),
  -- The claim reads this range in order: status and queue are equalities,
  -- then rows come sorted by priority, available_at, id (no filesort, so
  -- SKIP LOCKED locks only the rows it returns).
  KEY ix_prefork_jobs_claim (status, queue, priority, available_at, id),
  -- Lease recovery reads reserved rows whose lease ended, oldest first.
  KEY ix_prefork_jobs_lease (status, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
