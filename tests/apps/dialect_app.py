"""A test handler that reports, from inside its transaction, how the worker's
MySQL session is set up: what tells the two dialects apart on a MariaDB server."""
import json
from pathlib import Path

import prefork

SESSION = ("SELECT @@SESSION.sql_mode, @@SESSION.wait_timeout, @@GLOBAL.wait_timeout,"
           " @@SESSION.idle_transaction_timeout, @@SESSION.tx_isolation, @prefork_claimed")
NAMES = ("sql_mode", "wait_timeout", "global_wait_timeout", "idle_transaction_timeout",
         "isolation", "prefork_claimed")


@prefork.handler("session_settings")
def session_settings(job):
    """Writes the session's settings as JSON to the file payload['out']."""
    with job.transaction() as cursor:
        cursor.execute(SESSION)
        values = [value.decode() if isinstance(value, bytes) else value
                  for value in cursor.fetchone()]
    Path(job.payload["out"]).write_text(json.dumps(dict(zip(NAMES, values))))
