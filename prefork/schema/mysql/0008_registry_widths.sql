-- The registry's heartbeat must never fail for its size: a supervisor's queue
-- list (up to 1000 names of 64 characters) outgrew VARCHAR(1000), and the
-- description of a large pool (a few hundred workers on long job types) outgrew
-- TEXT's 65,535 bytes. The supervisor bounds what it writes of its children
-- (prefork/supervisor/heartbeat.py) well under MEDIUMTEXT's 16 MiB.
ALTER TABLE prefork_processes MODIFY queues MEDIUMTEXT NOT NULL,
  MODIFY children MEDIUMTEXT NULL;
