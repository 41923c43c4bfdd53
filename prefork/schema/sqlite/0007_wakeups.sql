-- Cross-host wake-ups: the UDP address a supervisor listens on (as schema/mysql/0007).
ALTER TABLE prefork_processes ADD COLUMN wakeup_address TEXT NULL;
