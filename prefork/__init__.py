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
        job_id = client.enqueue("report.generate", {"id": 7})   # inserts, commits and rings
        client.result(job_id, wait=30)   # what the handler returned, once done

    prefork.result(job_id)   # the same on the configured DSN's default Client

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
from typing import TYPE_CHECKING

# What `import prefork` offers, and the module each name lives in. Each is imported on
# first use (PEP 562), not here: a process that needs one part (the command line, a
# worker) does not pay for the others, and `prefork-queue run` holds its signals before
# the store and the drivers are loaded (supervisor/startup.py).
PUBLIC = {
    "handler": "registry", "on_success": "registry", "on_failure": "registry",
    "on_dead": "registry", "JobAttempt": "worker.attempt",
    "enqueue": "client", "cancel": "client", "notify": "client", "Client": "client",
    "Connection": "client", "result": "client",
    "Job": "jobs",
    "CancelReport": "cancellation",
    "PermanentError": "errors", "LeaseLost": "errors", "JobCancelled": "errors",
    "JobFailed": "errors", "JobNotFinished": "errors",
    "Batch": "workflows.api", "enqueue_workflow": "workflows.api", "open_batch": "workflows.api",
    "workflow_progress": "workflows.api",
    "Enqueued": "workflows.model", "OnDead": "workflows.model", "Policy": "workflows.model",
    "Progress": "workflows.model",
    "chain": "workflows.spec", "group": "workflows.spec", "job": "workflows.spec",
}
__all__ = ["handler", "enqueue", "cancel", "notify", "result", "Client", "Job", "CancelReport",
           "PermanentError", "LeaseLost", "JobCancelled", "JobFailed", "JobNotFinished",
           "on_success", "on_failure", "on_dead", "JobAttempt",
           "job", "chain", "group", "enqueue_workflow", "open_batch", "Batch",
           "workflow_progress", "Enqueued", "Progress", "Policy", "OnDead"]

if TYPE_CHECKING:   # what type checkers see: these names and no other
    from .cancellation import CancelReport as CancelReport
    from .client import Client as Client, Connection as Connection, cancel as cancel
    from .client import enqueue as enqueue, notify as notify, result as result
    from .errors import JobCancelled as JobCancelled, LeaseLost as LeaseLost
    from .errors import JobFailed as JobFailed, JobNotFinished as JobNotFinished
    from .errors import PermanentError as PermanentError
    from .jobs import Job as Job
    from .registry import handler as handler, on_dead as on_dead
    from .registry import on_failure as on_failure, on_success as on_success
    from .worker.attempt import JobAttempt as JobAttempt
    from .workflows.api import Batch as Batch, enqueue_workflow as enqueue_workflow
    from .workflows.api import open_batch as open_batch, workflow_progress as workflow_progress
    from .workflows.model import Enqueued as Enqueued, OnDead as OnDead, Policy as Policy
    from .workflows.model import Progress as Progress
    from .workflows.spec import chain as chain, group as group, job as job

    __version__: str
else:
    from importlib import import_module

    def __getattr__(name):
        """A public name, imported from its module on first use and kept here; and
        __version__, the installed package's (setup.cfg holds the one literal)."""
        if name == "__version__":
            from importlib import metadata
            value = metadata.version("prefork-queue")
        elif name in PUBLIC:
            value = getattr(import_module(f".{PUBLIC[name]}", __name__), name)
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__():
        return sorted(set(globals()) | set(PUBLIC) | {"__version__"})
