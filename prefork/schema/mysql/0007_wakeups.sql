-- Cross-host wake-ups (prefork/wakeups/udp.py): the UDP address a supervisor
-- listens on for rings ("10.0.0.5:8188", "[fd00::5]:8188"; NULL: it does not
-- listen). Producers read those of the running supervisors, a few seconds at a
-- time, and ring the ones whose queues get a job. It goes with its row: `prune`
-- deletes both.
ALTER TABLE prefork_processes ADD COLUMN wakeup_address VARCHAR(100) NULL AFTER children;
