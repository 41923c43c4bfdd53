"""Cross-host wake-ups in the registry (prefork/wakeups/udp.py and remote.py): a
supervisor publishes the UDP address it listens on; producers read those of the
running supervisors. A part of MySQLStore; statements in wakeup_queries.py.

peers_of() reads them on an application's connection (prefork.notify()) only
when that leaves the connection as it was: with autocommit on, or outside a
transaction, which it then ends (a read begins one when autocommit is off; left
open, its snapshot would be the application's next transaction's).
"""
from contextlib import closing
from typing import Any

from pymysql.constants import SERVER_STATUS

from ...wakeups.remote import PEER_READ_BOUNDS, PeerRows
from .session import MySQLSession
from .wakeup_queries import PUBLISH_WAKEUP, WAKEUP_PEERS


class MySQLWakeups(MySQLSession):
    def publish_wakeup(self, process_id: int, address: str) -> None:
        self._rowcount(PUBLISH_WAKEUP, (address, process_id))

    def wakeup_peers(self) -> PeerRows:
        return self._all(WAKEUP_PEERS, PEER_READ_BOUNDS)


def peers_of(conn: Any) -> PeerRows | None:
    """The registry's listening supervisors, read on an application's DB-API connection
    (PyMySQL, mysqlclient, mysql-connector-python); None when it is in a transaction,
    or its driver does not say whether it is (mysqlclient without autocommit)."""
    autocommit = _autocommit(conn)
    if not autocommit and _in_transaction(conn) is not False:
        return None
    with closing(conn.cursor()) as cursor:
        cursor.execute(WAKEUP_PEERS, PEER_READ_BOUNDS)
        rows = list(cursor.fetchall())
    if not autocommit:
        conn.rollback()   # the transaction our read began: it held nothing else
    return rows


def _autocommit(conn: Any) -> bool:
    getter = getattr(conn, "get_autocommit", None)   # PyMySQL, mysqlclient
    return bool(getter() if getter is not None else conn.autocommit)


def _in_transaction(conn: Any) -> bool | None:
    flag = getattr(conn, "in_transaction", None)   # mysql-connector-python
    if isinstance(flag, bool):
        return flag
    status = getattr(conn, "server_status", None)   # PyMySQL: the last reply's flags
    if isinstance(status, int):
        return bool(status & SERVER_STATUS.SERVER_STATUS_IN_TRANS)
    return None
