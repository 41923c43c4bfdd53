-- Operating many hosts on one database: the supervisor registry, pausing
-- queues, cluster-wide restart requests, and fast status and pruning.
-- Plain DDL (MySQL 8 has no ADD COLUMN / CREATE INDEX IF NOT EXISTS): migrate
-- applies each version once, under a named lock.

-- One row per supervisor run. It heartbeats; any other supervisor marks a
-- silent one 'pruned' and hands back the jobs its children held. Rows are
-- never deleted by workers (no DELETE grant); `prune` removes old ones.
CREATE TABLE IF NOT EXISTS prefork_processes (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  host          VARCHAR(255) NOT NULL,
  pid           INT UNSIGNED NOT NULL,
  state         ENUM('running','stopped','pruned') NOT NULL DEFAULT 'running',
  queues        VARCHAR(1000) NOT NULL,
  workers       INT UNSIGNED NOT NULL,
  version       VARCHAR(32)  NOT NULL,
  children      TEXT NULL,                 -- JSON: what each child is doing
  started_at    DATETIME(6) NOT NULL,
  heartbeat_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  KEY ix_prefork_processes_state (state, heartbeat_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Which supervisor's child holds a reserved job, so that a vanished
-- supervisor's jobs come back without waiting for their leases.
ALTER TABLE prefork_jobs ADD COLUMN process_id BIGINT UNSIGNED NULL AFTER locked_by;

-- Done and dead jobs by age: `status` (done in the last hour) and `prune`.
CREATE INDEX ix_prefork_jobs_finished ON prefork_jobs (status, finished_at);

-- Paused queues are not claimed by any host; a row per queue ever paused.
CREATE TABLE IF NOT EXISTS prefork_queue_states (
  queue       VARCHAR(64) NOT NULL,
  paused      TINYINT(1)  NOT NULL DEFAULT 0,
  updated_at  DATETIME(6) NOT NULL,
  PRIMARY KEY (queue)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- `prefork-queue restart`: children started before requested_at are replaced.
-- host '*' means every host.
CREATE TABLE IF NOT EXISTS prefork_restarts (
  host          VARCHAR(255) NOT NULL,
  requested_at  DATETIME(6)  NOT NULL,
  PRIMARY KEY (host)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
