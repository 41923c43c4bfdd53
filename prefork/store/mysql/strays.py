"""The jobs a server holds in a supervisor's name that none of its workers holds,
given back after a reconnection (store.hand_back_strays). A part of MySQLStore; its
statements are named in queries.py."""
from collections.abc import Callable

from ..contract import HeldJob
from .queries import RETURN_STRAYS, STRAYS_OF, placeholders
from .members import MySQLMembers
from .workflows import MySQLFlows


class MySQLStrays(MySQLMembers):
    def hand_back_strays(self, process_id: int, spare: Callable[[HeldJob], bool]) -> list[int]:
        return self._retry_contention(lambda: self._hand_back_strays(process_id, spare))

    def _hand_back_strays(self, process_id: int, spare: Callable[[HeldJob], bool]) -> list[int]:
        # The reserved rows stay locked from the read to the commit: a worker's
        # completion of one of them waits, then finds it given back (lease lost).
        with self._transaction() as cursor:
            cursor.execute(STRAYS_OF, (process_id,))
            rows = [row for row in cursor.fetchall()
                    if not spare(HeldJob(row[0], row[1] or "", row[2] / 1e6))]
            strays = [row[0] for row in rows]
            if strays:
                cursor.execute(RETURN_STRAYS.format(ids=placeholders(len(strays))),
                               (*strays, process_id))
                MySQLFlows(cursor).settle_returned([row[0] for row in rows if row[3]])
        return strays
