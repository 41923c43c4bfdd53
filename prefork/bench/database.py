"""The bench's own connection: the store it enqueues with, plus the few reads and
deletes of its scratch queues. Their SQL lives in the backend's store module."""
import importlib
import json

import psutil

from .. import enqueue as enqueue_as_application
from ..store import open_store

# Counters that have a per-connection value, so the bench can take its own out.
OWN_COUNTERS = ("Questions", "Com_commit", "Handler_commit", "Handler_read_next")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class BenchDatabase:
    def __init__(self, config, check_schema=True):
        self.store = open_store(config)
        if check_schema:
            self.store.check_schema()
        dialect = type(self.store).__module__.rsplit(".", 1)[0]   # prefork.store.mysql
        self.sql = importlib.import_module(dialect + ".bench")   # prefork.store.mysql.bench
        self.flow_sql = importlib.import_module(dialect + ".workflow_bench")
        self.is_mysql = dialect.endswith(".mysql")
        # The SQL dialect a MySQL store speaks (the `dialect` setting, or the
        # server's for auto); None on SQLite.
        self.dialect = str(self.store.dialect) if self.is_mysql else None

    def enqueue_many(self, jobs):
        return self.store.enqueue_many(jobs)

    def enqueue(self, job):
        return self.store.enqueue(job)

    def enqueue_unrung(self, job):
        """Enqueue as an application does, on its own connection: no doorbell rung."""
        return enqueue_as_application(self.store.conn, job.type, json.loads(job.payload_text),
                                      queue=job.queue)

    def unfinished(self, queue):
        return self.sql.bench_unfinished(self.store, queue)

    def flow_unfinished(self, queue):
        """Jobs of `queue` not ended yet, the waiting ones of workflows too."""
        return self.flow_sql.bench_flow_unfinished(self.store, queue)

    def finished_at(self, queue):
        """{job id: when it was written done (epoch seconds, the database's clock)}."""
        return self.flow_sql.bench_finished_at(self.store, queue)

    def delete_workflows(self, key_prefix):
        """Delete the workflows whose keys start with `key_prefix`, nested ones too."""
        return self.flow_sql.bench_delete_workflows(self.store, key_prefix)

    def unfinished_due(self, queue, priority):
        """Unfinished jobs of `queue` at `priority`, the delayed ones not yet due left out."""
        return self.sql.bench_unfinished_due(self.store, queue, priority)

    def done(self, queue):
        """How many jobs of `queue` are done (MySQL only)."""
        return self.sql.bench_done(self.store, queue)

    def effects_table(self, present):
        """Create (present=True) or drop the effects scenario's table (MySQL only)."""
        self.sql.bench_effects_table(self.store, present)

    @property
    def peers_database_name(self):
        """Where the enqueue_one row's peers keep their tables (MySQL only)."""
        return self.sql.PEERS_DATABASE

    def peers_database(self, present):
        """Create (present=True) or drop the peers' scratch database (MySQL only)."""
        self.sql.bench_peers_database(self.store, present)

    def effects_written(self):
        return self.sql.bench_effects_written(self.store)

    def bare_insert(self, jobs, delay_seconds=0.0):
        """Insert `jobs` with a bare multi-row INSERT (MySQL only), due after `delay_seconds`."""
        return self.sql.bench_bare_insert(self.store, jobs, delay_seconds)

    def delete_queue(self, queue):
        return self.sql.bench_delete_queue(self.store, queue)

    def most_reserved_per_group(self, queue):
        """The most reserved jobs any one limit group (type, concurrency key) of `queue` has now."""
        return self.sql.bench_most_reserved_per_group(self.store, queue)

    def limited_done(self, queue):
        """How many done jobs of `queue` were enqueued as limited."""
        return self.sql.bench_limited_done(self.store, queue)

    def delete_limits(self, job_types, key_prefix):
        """Delete the published rules of `job_types` and their groups whose concurrency
        keys start with `key_prefix`."""
        self.sql.bench_delete_limits(self.store, job_types, key_prefix)

    def counters(self):
        """Server counters as the rest of the server moved them: server-wide values
        minus this connection's own statements. None on SQLite (no server)."""
        if not self.is_mysql:
            return None
        server, own = self.sql.bench_counters(self.store)
        return {name: value - (own.get(name, 0) if name in OWN_COUNTERS else 0)
                for name, value in server.items()}

    def fill_done(self, queue, rows, job_type, payload_text):
        """Yields the number of done rows after each doubling (MySQL only)."""
        return self.sql.bench_fill_done(self.store, queue, rows, job_type, payload_text)

    def server_process(self):
        """The database server's process when it listens on this host (for its CPU
        time), else None: found by its TCP port; a Unix socket DSN is not looked up."""
        args = getattr(self.store, "dsn_args", None)
        if not args or args["unix_socket"] or args["host"] not in LOCAL_HOSTS:
            return None
        try:
            for conn in psutil.net_connections("tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.port == args["port"]:
                    return psutil.Process(conn.pid) if conn.pid else None
        except psutil.Error:
            pass
        return None

    def close(self):
        self.store.close()
