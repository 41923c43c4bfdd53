-- Concurrency and rate limits, and cancellation (prefork/limits/, `cancel`).
--
-- status gains 'cancelled', a terminal state like done and dead (appended to
-- the ENUM: existing values keep their numbers). concurrency_key groups the
-- jobs of a limited type ('' = the type's one group without a key). limited
-- is 1 for the jobs of a type that has a rule in prefork_limits, set at
-- enqueue from that table: the plain claim reads only limited = 0 (an
-- equality of the claim index, so jobs without limits pay nothing and never
-- step over waiting limited ones), the limited claim only limited = 1.
-- cancel_requested_at marks a running job whose cancellation its supervisor
-- has still to carry out; it is cleared when the job ends, so its index holds
-- only the pending requests.
ALTER TABLE prefork_jobs
  MODIFY status ENUM('ready','reserved','done','dead','cancelled') NOT NULL DEFAULT 'ready',
  ADD COLUMN concurrency_key VARCHAR(191) NOT NULL DEFAULT '',
  ADD COLUMN limited TINYINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN cancel_requested_at DATETIME(6) NULL,
  DROP INDEX ix_prefork_jobs_claim,
  ADD INDEX ix_prefork_jobs_claim (status, queue, limited, priority, available_at, id),
  ADD INDEX ix_prefork_jobs_cancel (cancel_requested_at);

-- The limits the supervisors declare (handler(concurrency=, rate=) and
-- [command:TYPE] sections), published at start: the enqueue statement reads it
-- to set `limited`, `status` and the dashboard to show the limits.
CREATE TABLE IF NOT EXISTS prefork_limits (
  job_type      VARCHAR(128) NOT NULL,
  concurrency   INT UNSIGNED NULL,          -- at most this many running per group
  rate_count    INT UNSIGNED NULL,          -- at most rate_count starts per group
  rate_seconds  INT UNSIGNED NULL,          -- ... every rate_seconds
  updated_at    DATETIME(6)  NOT NULL,
  PRIMARY KEY (job_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per limited group: the lock a limited claim takes (FOR UPDATE SKIP
-- LOCKED) before counting the group's reserved jobs, so two claimers never
-- both fill its last slot; and the group's token bucket for a rate. A slot is
-- a reserved job: nothing here is taken or given back, so nothing can leak.
CREATE TABLE IF NOT EXISTS prefork_limit_groups (
  job_type         VARCHAR(128) NOT NULL,
  concurrency_key  VARCHAR(191) NOT NULL,
  tokens           DOUBLE       NOT NULL,   -- starts left in the bucket at refilled_at
  refilled_at      DATETIME(6)  NOT NULL,
  PRIMARY KEY (job_type, concurrency_key),
  KEY ix_prefork_limit_groups_refilled (refilled_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
