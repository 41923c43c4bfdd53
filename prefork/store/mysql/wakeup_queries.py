"""The statements of cross-host wake-ups (wakeups.py), in both MySQL dialects."""

# A supervisor publishes where it listens (its own row, after registering).
PUBLISH_WAKEUP = "UPDATE prefork_processes SET wakeup_address = %s WHERE id = %s"

# The producers' read, a few seconds apart: the running supervisors that listen,
# and their queues (heartbeats keep those current), both bounded (the longest
# queue list a config allows, the freshest rows: wakeups/remote.py says how many),
# whatever the rows hold: whoever can write them does not choose what we read.
WAKEUP_PEERS = (
    "SELECT wakeup_address, SUBSTR(queues, 1, %s) FROM prefork_processes"
    " FORCE INDEX (ix_prefork_processes_state)"
    " WHERE state = 'running' AND wakeup_address IS NOT NULL"
    " ORDER BY heartbeat_at DESC LIMIT %s")
