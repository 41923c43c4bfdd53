"""prefork-queue: a pre-fork supervisor for a durable, database-backed job queue.

Application API::

    import prefork

    @prefork.handler("report.generate")
    def generate(job):
        with job.transaction() as cursor:   # effect + completion, one commit
            cursor.execute("INSERT INTO reports ...", (...))

    prefork.enqueue(conn, "report.generate", {"id": 7}, key="report-7")
    conn.commit()
    prefork.notify(conn)   # optional: wake this host's idle workers now

    report = prefork.cancel(conn, job_id)   # in the open transaction, as enqueue
    conn.commit()                           # report.cancelled, .stopping, .finished, .missing

    with prefork.Client() as client:     # a script: its own connection, the configured DSN
        client.enqueue("report.generate", {"id": 7})   # inserts, commits and rings

`conn` is the application's connection to the queue database, in its open
transaction: a DB-API connection of PyMySQL, mysqlclient, mysql-connector-python
or sqlite3, or a SQLAlchemy Session or Connection on one of them.
The `cursor` from `job.transaction()` takes `%s` placeholders on both backends
(`%%` for a literal percent, as PyMySQL reads it), so a handler written on the
quick start's SQLite file runs unchanged on MySQL. Don't put `%s` inside a string
literal or comment: PyMySQL substitutes there.

Workflows: a chain runs its steps one after the other, a group its members at once and
then its callback, once; a batch takes members until it is closed (see
prefork/workflows/)::

    flow = prefork.chain(prefork.job("order.charge", {"order": 7}),
                         prefork.group([prefork.job("mail.send", {"to": to}) for to in team],
                                       then=prefork.job("order.close", {"order": 7})))
    prefork.enqueue_workflow(conn, flow, key="order-7")   # in the open transaction
    conn.commit()

Running enqueued jobs inline in an application's tests: `import prefork.testing`
(not imported here, so production processes do not load it).
"""
from importlib import metadata

from .cancellation import CancelReport
from .client import Client, Connection, cancel, enqueue, notify
from .errors import JobCancelled, LeaseLost, PermanentError
from .jobs import Job
from .registry import handler
from .workflows.api import Batch, enqueue_workflow, open_batch, workflow_progress
from .workflows.model import Enqueued, OnDead, Policy, Progress
from .workflows.spec import chain, group, job

# The one version literal is setup.cfg's; an installed package (wheel or editable) has it
# in its metadata.
__version__ = metadata.version("prefork-queue")
__all__ = ["handler", "enqueue", "cancel", "notify", "Client", "Job", "CancelReport",
           "PermanentError", "LeaseLost", "JobCancelled",
           "job", "chain", "group", "enqueue_workflow", "open_batch", "Batch",
           "workflow_progress", "Enqueued", "Progress", "Policy", "OnDead"]
