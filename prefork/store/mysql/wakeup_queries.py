"""The statements of cross-host wake-ups (wakeups.py), in both MySQL dialects."""

# A supervisor publishes where it listens (its own row, after registering).
PUBLISH_WAKEUP = "UPDATE prefork_processes SET wakeup_address = %s WHERE id = %s"

# The producers' read, a few seconds apart: the running supervisors that listen,
# and their queues (heartbeats keep those current). The running rows are few.
WAKEUP_PEERS = (
    "SELECT wakeup_address, queues FROM prefork_processes"
    " FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running' AND wakeup_address IS NOT NULL")
