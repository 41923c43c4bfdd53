"""What the store tests of limits and of cancellation share: the ways a claimed job
leaves `reserved` but a completion (each called with the store, the test's db, the
job and its supervisor's id; each returns what the store answered), and how a test's
own statement writes a time."""
from datetime import datetime

from prefork.retry import Decision
from prefork.store.sqlite.file import stamp

LONG_AGO = datetime(2000, 1, 1)


def at(db, moment):
    """A time as the backend stores it, for a test's own statement."""
    return stamp(moment) if db.backend == "sqlite" else moment


def _expire(s, db, job, process_id):
    db.execute("UPDATE prefork_jobs SET lease_until = %s WHERE id = %s",
               (at(db, LONG_AGO), job.id))
    return s.recover_expired() == 1


def _silent_supervisor(s, db, job, process_id):
    db.execute("UPDATE prefork_processes SET heartbeat_at = %s", (at(db, LONG_AGO),))
    return s.prune_silent(3600) == [(process_id, 1)]


# Each test adds the hand-backs, with what it expects of their answer.
WAYS_OUT = {
    "fail and retry": lambda s, db, job, _: s.fail(job, "Boom", Decision(dead=False, delay=0)),
    "fail for good": lambda s, db, job, _: s.fail(job, "Boom", Decision(dead=True, delay=0)),
    "release": lambda s, db, job, _: s.release(job),
    "lease expiry": _expire,
    "silent supervisor": _silent_supervisor,
}
