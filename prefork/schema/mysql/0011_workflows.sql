-- Workflows (prefork/workflows/): chains, groups and batches of jobs whose
-- bookkeeping commits with each member's end.
--
-- status gains 'waiting' (appended to the ENUM: existing values keep their
-- numbers): a member its workflow has not released yet (a chain's later step,
-- a group inside a chain, a batch's callback). No claim reads it: it becomes
-- 'ready' in the transaction that ends the member before it.
-- workflow_id: the prefork_workflows row the job is a member of (NULL: a plain
-- job). workflow_step: its place there, 0 and up (a chain's step, a group's
-- member); -1 and -2 are a batch's on_success and on_complete callbacks, which
-- are plain jobs once released. The index serves a release (the waiting jobs
-- of one step, or of a whole group) and a workflow's list of jobs.
ALTER TABLE prefork_jobs
  MODIFY status ENUM('ready','reserved','done','dead','cancelled','waiting')
    NOT NULL DEFAULT 'ready',
  ADD COLUMN workflow_id BIGINT UNSIGNED NULL,
  ADD COLUMN workflow_step INT NULL,
  ADD INDEX ix_prefork_jobs_workflow (workflow_id, workflow_step);

-- One row per chain, group or batch, nested ones too: a chain whose step is a
-- group has a row for each, the group's parent_id naming the chain. The
-- counters are of its members (jobs and nested workflows) that ended done,
-- dead or cancelled; each member's end adds to them in its own transaction,
-- which locks this row and writes it (on a cluster with writers on several
-- nodes, two ends certify against each other here: one is retried).
CREATE TABLE IF NOT EXISTS prefork_workflows (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  root_id         BIGINT UNSIGNED NULL,        -- the outermost workflow (NULL: this is it)
  parent_id       BIGINT UNSIGNED NULL,        -- the workflow this one is a member of
  parent_step     INT          NOT NULL DEFAULT 0,   -- its place there
  kind            ENUM('chain','group','batch') NOT NULL,
  state           ENUM('waiting','running','done','dead','cancelled') NOT NULL,
  policy          ENUM('done','ended') NOT NULL DEFAULT 'done',   -- a group: when it passes
  on_dead         ENUM('wait','cancel') NOT NULL DEFAULT 'wait',  -- a chain: its later steps
  is_open         TINYINT UNSIGNED NOT NULL DEFAULT 0,  -- a batch that takes new members
  current_step    INT          NOT NULL DEFAULT 0,      -- a chain: the step released last
  total           INT UNSIGNED NOT NULL DEFAULT 0,
  done            INT UNSIGNED NOT NULL DEFAULT 0,
  dead            INT UNSIGNED NOT NULL DEFAULT 0,
  cancelled       INT UNSIGNED NOT NULL DEFAULT 0,
  idempotency_key VARCHAR(191) NULL,           -- an outermost workflow's: one per key
  created_at      DATETIME(6)  NOT NULL,
  updated_at      DATETIME(6)  NOT NULL,
  finished_at     DATETIME(6)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_prefork_workflows_key (idempotency_key),
  KEY ix_prefork_workflows_parent (parent_id, parent_step),
  -- The nested workflows of an outermost one (root_id); the outermost ones
  -- (root_id NULL) by state, as the metrics count them, and finished ones by
  -- age, as `prune` deletes them.
  KEY ix_prefork_workflows_root (root_id, state, finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
