-- What a supervisor publishes in its registry row at its start and after each
-- reload: the job types it handles, joined by "," as its queues are (NULL: none
-- listed, by an older release or past the bound in prefork/store/registry_rows.py),
-- which `enqueue` checks a job's type against; and its heartbeat interval in
-- seconds, by which `status` and the dashboard judge it stale.
ALTER TABLE prefork_processes ADD COLUMN job_types MEDIUMTEXT NULL AFTER wakeup_address,
  ADD COLUMN heartbeat_interval DOUBLE NULL AFTER job_types;
