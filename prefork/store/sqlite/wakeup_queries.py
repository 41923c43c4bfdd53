"""The statements of cross-host wake-ups (wakeups.py)."""

# A supervisor publishes where it listens (its own row, after registering).
PUBLISH_WAKEUP = "UPDATE prefork_processes SET wakeup_address = :address WHERE id = :id"

# The producers' read, a few seconds apart: the running supervisors that listen,
# and their queues, bounded as in MySQL's (its wakeup_address is VARCHAR(100)).
WAKEUP_PEERS = ("SELECT substr(wakeup_address, 1, 100), substr(queues, 1, :queues_text)"
                " FROM prefork_processes WHERE state = 'running' AND wakeup_address IS NOT NULL"
                " ORDER BY heartbeat_at DESC LIMIT :rows")
