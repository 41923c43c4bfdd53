"""The one catalogue of event names: every log event the package emits, with what it
means and the level it is logged at.

`logs.event()` refuses a name that is not here, so renaming an event here (or at
a call site) breaks every test that exercises the call; tests that assert an
event did or did not happen name it through this catalogue. Call sites may pass
a member (`Event.JOB_CLAIMED`) or its plain string ("job_claimed"): the enum
is str-valued, so both are the same name. tests/fast/test_events.py checks that
every name used in the source is declared here and every entry is used.
"""
import enum
from logging import ERROR, INFO, WARNING


class Event(enum.StrEnum):
    """An event name, with `level` (the logging level when the call gives none) and
    `meaning` (one line, for readers of the logs and of this file)."""

    level: int
    meaning: str

    def __new__(cls, name: str, level: int, meaning: str) -> "Event":
        member = str.__new__(cls, name)
        member._value_ = name
        member.level = level
        member.meaning = meaning
        return member

    # -- the supervisor (supervisor/loop.py) ------------------------------------------
    SUPERVISOR_STARTED = ("supervisor_started", INFO,
                          "the supervisor is up: its worker count, queues and pid")
    SUPERVISOR_STOPPING = ("supervisor_stopping", INFO,
                           "a stop signal began a graceful or a quick stop")
    SUPERVISOR_STOPPED = ("supervisor_stopped", INFO,
                          "the supervisor stopped cleanly; jobs done and dead in its life")
    WORKERS_CHANGED = ("workers_changed", INFO, "SIGTTIN or SIGTTOU changed the worker count")
    LOGS_REOPENED = ("logs_reopened", INFO, "SIGUSR1 reopened the log file")
    CONFIG_RELOADED = ("config_reloaded", INFO,
                       "SIGHUP applied a new config; a new generation of children follows")
    CONFIG_RELOAD_FAILED = ("config_reload_failed", ERROR,
                            "SIGHUP's config was refused; the old one stays in force")
    LIMITS_PUBLISHED = ("limits_published", INFO,
                        "the limits in force here (at start, after a reload) were recorded in "
                        "the database: the limited job types")
    LIMIT_REPLACED = ("limit_replaced", WARNING,
                      "a publish replaced another supervisor's different rule for a job "
                      "type: the one now in force on every host, and the one before")
    RESTART_REQUESTED = ("restart_requested", INFO,
                         "a `restart` request retired the workers older than it")
    RESTART_BACKOFF = ("restart_backoff", WARNING,
                       "children keep failing at start: the next spawn waits")
    # -- its children ---------------------------------------------------------------
    WORKER_SPAWNED = ("worker_spawned", INFO, "a child was forked into a slot")
    WORKER_READY = ("worker_ready", INFO, "a child booted and connected; it claims jobs now")
    WORKER_EXITED = ("worker_exited", INFO,
                     "a child exited (logged as a warning when nobody asked it to)")
    WORKER_RECYCLED = ("worker_recycled", INFO,
                       "a child retired on purpose (jobs, memory or age limit)")
    WORKER_BOOT_FAILED = ("worker_boot_failed", ERROR, "a child could not boot")
    WORKER_FATAL = ("worker_fatal", ERROR,
                    "a process died of an unexpected error (its class, never its message)")
    WORKER_PARENT_SILENT = ("worker_parent_silent", WARNING,
                            "a child's supervisor stopped beating or extending leases (frozen, "
                            "stuck, its database failing): before another may take its job, "
                            "the child interrupts it, gives it back and exits")
    # -- the supervisor's database work (supervisor/upkeep.py) --------------------------
    SUPERVISOR_REGISTERED = ("supervisor_registered", INFO,
                             "the supervisor's row was written; its heartbeat follows")
    SUPERVISOR_PRUNED = ("supervisor_pruned", WARNING,
                         "a silent supervisor's row was removed and its jobs handed back")
    SUPERVISOR_REJOINED = ("supervisor_rejoined", WARNING,
                           "this supervisor was pruned as silent and registered again")
    SUPERVISOR_DB_UNAVAILABLE = ("supervisor_db_unavailable", WARNING,
                                 "the supervisor cannot reach the database; it retries")
    SUPERVISOR_DB_ERROR = ("supervisor_db_error", WARNING,
                           "a database call of the supervisor failed; it reconnects")
    SCHEMA_NEWER = ("schema_newer", WARNING,
                    "a newer release migrated the schema; this one runs on it until upgraded")
    HEARTBEAT_FAILING = ("heartbeat_failing", ERROR,
                         "the supervisor's heartbeats keep failing (why): it takes no new "
                         "jobs, its workers finish theirs, before others may prune it")
    HEARTBEAT_RESTORED = ("heartbeat_restored", WARNING,
                          "a heartbeat succeeded again after failing: the supervisor takes "
                          "jobs again")
    LEASES_NOT_EXTENDED = ("leases_not_extended", WARNING,
                           "some leases of running jobs could not be extended (lost)")
    LEASES_RECOVERED = ("leases_recovered", INFO,
                        "expired leases (a vanished host's jobs) were made ready again")
    ROLLUP_UNWRITTEN = ("rollup_unwritten", WARNING,
                        "at its stop, the supervisor could not write its last per-minute "
                        "counts (the database was away): the dashboard misses these jobs")
    JOB_HANDED_BACK = ("job_handed_back", INFO,
                       "a dead child's job was returned: ready again, or dead as poison")
    JOB_COMPLETED_BY_SUPERVISOR = ("job_completed_by_supervisor", INFO,
                                   "the parent wrote the completion of a child's finished job")
    JOB_CANCEL_SENT = ("job_cancel_sent", INFO,
                       "a child was told that a job it runs (running) or holds was cancelled")
    JOB_CANCEL_KILLED = ("job_cancel_killed", WARNING,
                         "a cancelled job's handler outlived cancel_grace: its child was "
                         "killed (and replaced) and the job ended cancelled")
    # -- a worker (worker/loop.py) ------------------------------------------------------
    WORKER_STARTED = ("worker_started", INFO, "a worker loop started on its queues")
    WORKER_STOPPED = ("worker_stopped", INFO, "a worker loop ended; jobs it processed")
    JOB_CLAIMED = ("job_claimed", INFO, "a job was claimed under a lease and is about to run")
    JOB_COMPLETED = ("job_completed", INFO, "a job's completion was committed")
    JOB_FAILED = ("job_failed", INFO, "an attempt failed (its error and traceback, per "
                  "error_detail); the job is retried after a backoff")
    JOB_DEAD = ("job_dead", INFO, "an attempt failed (its error and traceback) and the job "
                "is dead (no retry left, or its retry rules say so)")
    JOB_RESULT_NOT_KEPT = ("job_result_not_kept", WARNING,
                           "a handler returned a result after its job.transaction() had "
                           "committed: too late to keep it (set job.result inside the block)")
    RESULTS_EXPIRED = ("results_expired", INFO,
                       "the supervisor cleared results older than result_ttl")
    JOB_LEASE_LOST = ("job_lease_lost", INFO,
                      "a job's lease was lost: its result is void, another worker owns it")
    JOB_CANCELLED = ("job_cancelled", INFO,
                     "a running (or claimed, not started) job was cancelled: it ended "
                     "cancelled, not retried")
    CLAIM_RELEASED = ("claim_released", INFO, "a claimed job not yet started was given back")
    JOB_CONFLICT_RELEASED = ("job_conflict_released", WARNING,
                             "a job's transaction lost to a concurrent one (deadlock or "
                             "certification failure): rolled back, the job given back "
                             "with its attempt restored")
    CLAIM_RELEASED_ON_SHUTDOWN = ("claim_released_on_shutdown", INFO,
                                  "a stop gave a claimed (or interrupted) job back")
    # -- command jobs (worker/commands.py) ----------------------------------------------
    COMMAND_STARTED = ("command_started", INFO, "a command job's program started")
    COMMAND_OUTPUT = ("command_output", INFO, "one line of a program's stdout or stderr")
    COMMAND_OUTPUT_TRUNCATED = ("command_output_truncated", INFO,
                                "a program wrote more lines than are logged per job")
    COMMAND_STOPPING = ("command_stopping", INFO,
                        "a program is being stopped (timeout, quick stop or cancel)")
    COMMAND_EXITED = ("command_exited", INFO, "a program ended: its exit code or signal")
    # -- observers ----------------------------------------------------------------------
    METRICS_SERVING = ("metrics_serving", INFO, "the Prometheus endpoint is listening")
    METRICS_NOT_ON_LOOPBACK = ("metrics_not_on_loopback", WARNING,
                               "the metrics endpoint listens beyond this host")
    METRICS_ADDRESS_UNCHANGED = ("metrics_address_unchanged", WARNING,
                                 "a reload changed metrics_address; it applies at next start")
    SCHEDULE_ARMED = ("schedule_armed", INFO, "a schedule knows its next tick")
    SCHEDULE_ENQUEUED = ("schedule_enqueued", INFO, "a schedule's tick enqueued its job")
    SCHEDULE_TICKS_MISSED = ("schedule_ticks_missed", WARNING,
                             "ticks passed while nobody ran the schedule; they are skipped")
    SCHEDULES_RELOAD_FAILED = ("schedules_reload_failed", ERROR,
                               "a reload's schedules were refused; the old ones stay")
    # -- start-up and the SQLite store --------------------------------------------------
    EXAMPLE_HANDLERS = ("example_handlers", WARNING,
                        "no --app was given: the shipped example handlers run")
    SQLITE_WAL_UNAVAILABLE = ("sqlite_wal_unavailable", WARNING,
                              "the SQLite file cannot use WAL journaling")
    SQLITE_ON_NETWORK_FILESYSTEM = ("sqlite_on_network_filesystem", WARNING,
                                    "the SQLite file is on a network filesystem")
    SQLITE_SHARED_BY_HOSTS = ("sqlite_shared_by_hosts", WARNING,
                              "workers of another host hold jobs of this SQLite file")
    SQLITE_FILES_REPLACED = ("sqlite_files_replaced", WARNING,
                             "the SQLite -wal and -shm files this process had open were "
                             "deleted: it opened the database again (reopened), or could not "
                             "while another of its connections held them")
    # -- the hosts of a MySQL DSN (store/mysql/hosts.py) and failover ------------------
    DATABASE_HOST_SKIPPED = ("database_host_skipped", WARNING,
                             "a host of the DSN cannot be used (unreachable, read-only, a "
                             "Galera node not ready): the next one is tried")
    JOBS_HANDED_BACK_AFTER_RECONNECT = (
        "jobs_handed_back_after_reconnect", WARNING,
        "the server reached after a reconnection held jobs reserved by this supervisor "
        "that none of its workers runs (a failover lost their end): handed back at once")
    # -- the supervisor's hardening (supervisor/loop.py) ------------------------------------
    DOORBELL_UNAVAILABLE = ("doorbell_unavailable", WARNING,
                            "the doorbell's directory is unsafe or unusable: polling only")
    LOG_REOPEN_FAILED = ("log_reopen_failed", ERROR,
                         "SIGUSR1 could not reopen the log file; the old one stays open")
    SUPERVISOR_STEP_FAILED = ("supervisor_step_failed", ERROR,
                              "a signal's or an observer's step raised; logged and survived")
    # -- --reload's watcher (supervisor/reloader.py) ---------------------------------------
    RELOADER_STARTED = ("reloader_started", INFO,
                        "--reload: a watcher runs the supervisor and restarts it on a change")
    RELOAD_WATCHING = ("reload_watching", INFO,
                       "the supervisor reported its application's files; the watcher polls them")
    RELOAD_CHANGED = ("reload_changed", INFO,
                      "a watched file changed: the supervisor drains and a new one starts")
    RELOAD_SUPERVISOR_FAILED = ("reload_supervisor_failed", ERROR,
                                "the supervisor exited with an error; the next change "
                                "starts it again")

    # -- Django's Tasks framework (prefork.contrib.django) -----------------------------------
    DJANGO_READY = ("django_ready", INFO,
                    "Django was set up in the supervisor; its tasks are registered as handlers")
    DJANGO_MIGRATED = ("django_migrated", INFO,
                       "manage.py migrate applied the queue's schema versions to a database")
    # -- the dashboard (prefork/dashboard/) --------------------------------------------------
    DASHBOARD_STARTED = ("dashboard_started", INFO,
                         "the dashboard listens: its address, URL prefix, read-only or not")
    DASHBOARD_LOGIN_FAILED = ("dashboard_login_failed", WARNING,
                              "a wrong dashboard password (or one too many) from an address")
    DASHBOARD_ACTION = ("dashboard_action", INFO,
                        "a logged-in dashboard user retried, discarded, paused, resumed or "
                        "restarted: what, how many jobs, from which address")
    DASHBOARD_REQUEST_FAILED = ("dashboard_request_failed", ERROR,
                                "a dashboard request met an error nobody expected: answered "
                                "500; its method, path and traceback")

_BY_NAME = {member.value: member for member in Event}


def named(name: str) -> Event:
    """The catalogue entry for `name` (a member or its string); ValueError if none."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown event name {name!r}: declare it in prefork/events.py") from None
