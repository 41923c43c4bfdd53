"""Cross-host wake-ups in the registry (prefork/wakeups/udp.py and remote.py): a
supervisor publishes the UDP address it listens on; producers read those of the
running supervisors. A part of SQLiteStore; statements in wakeup_queries.py.
One file is one host's, but supervisors without the same-host doorbell
(doorbell = false) reach each other this way too.
"""
import sqlite3
from contextlib import closing

from ...wakeups.remote import PEER_READ_BOUNDS, PeerRows
from .session import SQLiteSession
from .wakeup_queries import PUBLISH_WAKEUP, WAKEUP_PEERS

# WAKEUP_PEERS' bounds, by name.
BOUNDS = dict(zip(("queues_text", "rows"), PEER_READ_BOUNDS))


class SQLiteWakeups(SQLiteSession):
    def publish_wakeup(self, process_id: int, address: str) -> None:
        self._write_one(PUBLISH_WAKEUP, {"address": address, "id": process_id})

    def wakeup_peers(self) -> PeerRows:
        with closing(self._read(WAKEUP_PEERS, BOUNDS)) as cursor:
            return list(cursor.fetchall())


def peers_of(conn: sqlite3.Connection) -> PeerRows | None:
    """The registry's listening supervisors, read on an application's connection; None
    while it is in a transaction (a read is left out of the application's)."""
    if conn.in_transaction:
        return None
    with closing(conn.execute(WAKEUP_PEERS, BOUNDS)) as cursor:
        rows = list(cursor.fetchall())
    if conn.in_transaction:
        conn.rollback()   # begun by our read (autocommit=False): it held nothing else
    return rows
