"""What watches the supervisor besides its log: each observer gets the supervisor's
notable moments and a tick on every pass of its loop.

An observer has three methods:
    notify(name, fields)   "started", "job_finished" (type, queue, outcome, seconds),
                           "worker_exited" (reason), "reloaded" (config),
                           "stopping", "stopped"
    tick(now, supervisor)  periodic work on the main loop (never in a signal handler)
    next_deadline()        the monotonic time of its next tick's work (math.inf: none),
                           so that the loop wakes for it
"""
from .metrics import Metrics
from .schedules import Scheduler
from .sdnotify import SystemdNotifier


def build(config):
    """The observers this configuration asks for."""
    candidates = [SystemdNotifier.from_environment(), Metrics.from_config(config),
                  Scheduler.from_config(config)]
    return [observer for observer in candidates if observer is not None]
