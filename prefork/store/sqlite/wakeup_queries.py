"""The statements of cross-host wake-ups (wakeups.py)."""

# A supervisor publishes where it listens (its own row, after registering).
PUBLISH_WAKEUP = "UPDATE prefork_processes SET wakeup_address = :address WHERE id = :id"

# The producers' read, a few seconds apart: the running supervisors that listen,
# and their queues.
WAKEUP_PEERS = ("SELECT wakeup_address, queues FROM prefork_processes"
                " WHERE state = 'running' AND wakeup_address IS NOT NULL")
