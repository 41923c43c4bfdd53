-- What a supervisor publishes in its registry row: the job types it handles and
-- its heartbeat interval in seconds (as schema/mysql/0009).
ALTER TABLE prefork_processes ADD COLUMN job_types TEXT NULL;
ALTER TABLE prefork_processes ADD COLUMN heartbeat_interval REAL NULL;
