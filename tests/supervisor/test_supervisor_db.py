"""The supervisor when its database goes away and comes back (issue 3, crash loops).

Each test starts its own throwaway MariaDB server (tests/throwaway_db.py), so
stopping it never touches the shared server on 3306. The supervisor runs as
`python -m prefork run` in a subprocess and is watched from outside: its JSON
log events, its process title (psutil) and the jobs table.
"""
import math
import signal
import time
from datetime import datetime

from conftest import run_cli, wait_until
from harness import SupervisorProcess, wait_gone
from throwaway_db import throwaway_mariadb  # noqa: F401  (pytest fixture)

from prefork import config as config_module
from prefork.jobs import new_job
from prefork.store.mysql.store import MySQLStore

WORKERS = 4
BACKOFF_CAP = 2.0              # --restart-backoff-cap
LEASE_SECONDS = 2.0            # --lease-seconds: held jobs come back quickly
DOWN_FOR = 6.0                 # how long the database stays away once the loop backs off
SLOW_SECONDS = 2.5             # the jobs held when the database dies
LEDGER_JOBS = 60
SLOW_JOB = "dbdown.slow_ledger"


# --- helpers ---------------------------------------------------------------------------

def prepare(server):
    """Migrate the throwaway database with the real CLI and add the ledger table.
    The ledger has no unique key: an effect written twice shows up as two rows."""
    migrated = run_cli("migrate", dsn=server.dsn, timeout=60)
    assert migrated.returncode == 0, migrated.stderr
    with server.connect(server.database) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
                       " idempotency_key VARCHAR(191) NOT NULL, job_id BIGINT NOT NULL,"
                       " KEY (idempotency_key))")


def enqueue(server, jobs):
    store = MySQLStore(config_module.load({"dsn": server.dsn}, environ={}))
    try:
        assert store.enqueue_many(jobs) == len(jobs)
    finally:
        store.close()


def query(server, sql, args=None):
    with server.connect(server.database) as conn, conn.cursor() as cursor:
        cursor.execute(sql, args)
        return cursor.fetchall()


def start_supervisor(tmp_path, server):
    return SupervisorProcess(
        tmp_path, server.dsn, "--workers", str(WORKERS),
        "--restart-backoff-cap", str(BACKOFF_CAP), "--lease-seconds", str(LEASE_SECONDS),
        "--app", "ledger_app,dbdown_app", "--poll-interval", "0.2", "--retry-base", "0.2")


def when(event):
    """An event's wall-clock time (epoch seconds) from its ISO timestamp."""
    return datetime.fromisoformat(event["ts"]).timestamp()


def between(events, start, end):
    return [e for e in events if start <= when(e) < end]


def most_in_any_second(events):
    times = sorted(when(e) for e in events)
    return max((sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times)),
               default=0)


def watch_titles(sup, seconds):
    """Sample the parent's title (what `ps` shows) for `seconds`; the parent must live."""
    titles = []
    end = time.monotonic() + seconds

    def sampled_long_enough():
        assert sup.proc.poll() is None, f"the supervisor died: exit {sup.proc.returncode}"
        titles.append(sup.title(sup.pid))
        return time.monotonic() >= end

    wait_until(sampled_long_enough, timeout=seconds + 5, interval=0.05,
               message="the end of the observation window")
    return titles


def take_database_away(sup, server):
    """Stop the server, let the children die and the restarts back off to the cap,
    and watch for DOWN_FOR seconds. Returns (stop time, first backoff time, titles)."""
    stopped_at = time.time()
    server.stop()
    first_backoff = sup.wait_event("restart_backoff", timeout=15)[0]
    sup.wait_event("restart_backoff", timeout=15, wait_s=BACKOFF_CAP)
    titles = watch_titles(sup, DOWN_FOR)
    return stopped_at, when(first_backoff), titles


# --- tests -----------------------------------------------------------------------------

def test_crash_loop_backs_off_while_database_is_down_and_pool_refills(throwaway_mariadb,
                                                                       tmp_path):
    server = throwaway_mariadb
    prepare(server)
    slow_keys = [f"slow-{n}" for n in range(WORKERS)]
    ledger_keys = [f"ledger-{n}" for n in range(LEDGER_JOBS)]
    sup = start_supervisor(tmp_path, server)
    try:
        sup.wait_event("worker_ready", count=WORKERS)
        # The slow jobs come first (priority -1): every child holds one when the server stops.
        enqueue(server, [new_job(SLOW_JOB, {"seconds": SLOW_SECONDS}, key=key, priority=-1)
                         for key in slow_keys]
                + [new_job("ledger", key=key) for key in ledger_keys])
        sup.wait_event("job_claimed", count=WORKERS, type=SLOW_JOB)
        assert not sup.events("restart_backoff"), "backing off while the database was up"

        stopped_at, backoff_from, titles = take_database_away(sup, server)
        down_events = sup.events()
        restarted_at = time.time()
        server.start()

        # Children die of their database errors (exit 4) and their replacements fail at
        # start (exit 3): that, not the crash of a running child, is what backs off.
        exits = [e for e in down_events if e["event"] == "worker_exited"]
        assert sum(e["status"] == "exit code 4" for e in exits) >= WORKERS, exits
        assert any(e["status"] == "exit code 3" and e["reason"] == "boot failure" for e in exits)
        backoffs = [e for e in down_events if e["event"] == "restart_backoff"]
        waits = [e["wait_s"] for e in backoffs]
        assert waits == sorted(waits), f"backoff waits must grow: {waits}"
        assert waits[0] < BACKOFF_CAP and max(waits) == BACKOFF_CAP, waits
        assert all("fail at start" in e["reason"] for e in backoffs)
        assert backoff_from >= stopped_at
        # No fork bomb: after the first boot failure, each fork waits at least the wait the
        # last restart_backoff event announced, and a round forks at most WORKERS children.
        spawns = between([e for e in down_events if e["event"] == "worker_spawned"],
                         backoff_from, restarted_at)
        for spawn in spawns:
            # The last back-off logged before the spawn (by the log's order: the parent
            # logs a spawn after the fork, often in the same millisecond as the back-off
            # that the new child's failure then announces).
            before = [e for e in down_events[:down_events.index(spawn)]
                      if e["event"] == "restart_backoff"]
            if not before:   # forked before the first back-off, in its millisecond
                continue
            announced = before[-1]
            assert when(spawn) >= when(announced) + announced["wait_s"] - 0.02, (spawn, announced)
        window = restarted_at - backoff_from
        rounds = (math.ceil(math.log2(BACKOFF_CAP / waits[0]))   # waits below the cap
                  + math.floor(window / BACKOFF_CAP) + 1)
        assert len(spawns) <= WORKERS * rounds, (len(spawns), round(window, 2), waits)
        assert most_in_any_second(spawns) <= WORKERS, spawns
        # The parent lived through it and told the operator why it waits.
        assert sup.proc.poll() is None
        assert any("restart backoff" in title for title in titles), set(titles)
        assert all("://" not in title for title in titles)

        # The database is back: the pool refills by itself.
        wait_until(
            lambda: len(between(sup.events("worker_ready"), restarted_at, math.inf)) >= WORKERS,
            timeout=BACKOFF_CAP + 15, message=f"{WORKERS} children ready after the restart")
        sup.wait_children(WORKERS)
        wait_until(lambda: "restart backoff" not in sup.title(sup.pid), timeout=5,
                   message="the title to drop 'restart backoff'")

        # Every job ends done, its effect written exactly once, including the jobs the
        # dying children held (handed back by the parent or recovered at lease expiry).
        total = WORKERS + LEDGER_JOBS
        wait_until(lambda: query(server, "SELECT COUNT(*) FROM prefork_jobs"
                                         " WHERE status = 'done'")[0][0] == total,
                   timeout=30, interval=0.1, message=f"{total} jobs done")
        rows = query(server, "SELECT j.idempotency_key, j.attempts, j.status, COUNT(l.id),"
                             " MIN(l.job_id) = j.id FROM prefork_jobs j"
                             " LEFT JOIN ledger l ON l.idempotency_key = j.idempotency_key"
                             " GROUP BY j.id")
        by_key = {key: (attempts, status, effects, same_job)
                  for key, attempts, status, effects, same_job in rows}
        assert set(by_key) == set(slow_keys + ledger_keys)
        assert all(effects == 1 and same_job for _, _, effects, same_job in by_key.values()), \
            {key: row for key, row in by_key.items() if row[2] != 1}
        assert query(server, "SELECT COUNT(*) FROM ledger")[0][0] == total
        # A held job comes back either through the parent's hand-back, which does not
        # charge the job for its worker's database failure, or through lease expiry,
        # which cannot tell and counts the attempt: it ran once more either way.
        assert all(by_key[key][0] in (1, 2) for key in slow_keys), by_key
        # A child that exited on its database error said so first (DatabaseFailed): its
        # job went back uncharged (tests/fast/test_protocol.py), unlike a handler's own
        # os._exit(4) (tests/worker/test_worker_exits.py).
        hand_backs = [e for e in sup.events("job_handed_back") if e["cause"] == "exit code 4"]
        assert not any(e["charged"] for e in hand_backs), hand_backs
        assert all(by_key[key][0] == 1 for key in ledger_keys), by_key

        # And it still drains cleanly.
        children = [child.pid for child in sup.children()]
        sup.signal(signal.SIGTERM)
        assert sup.wait_exit(timeout=20) == 0
        wait_gone(children)
    finally:
        sup.kill_all()


def test_backoff_probes_with_one_child_at_a_time(throwaway_mariadb, tmp_path):
    server = throwaway_mariadb
    prepare(server)
    sup = start_supervisor(tmp_path, server)
    try:
        sup.wait_event("worker_ready", count=WORKERS)
        # Idle children do not touch the database; busy ones notice it going away.
        enqueue(server, [new_job(SLOW_JOB, {"seconds": SLOW_SECONDS}, key=f"slow-{n}")
                         for n in range(WORKERS)])
        sup.wait_event("job_claimed", count=WORKERS, type=SLOW_JOB)
        _, backoff_from, _ = take_database_away(sup, server)
        # The first boot failures come from the immediate replacements of the children
        # that crashed; from then on only one probe child may be starting at a time.
        spawns = [e for e in sup.events("worker_spawned") if when(e) > backoff_from]
        times = sorted(when(e) for e in spawns)
        assert times, "no probe child was started while the database was down"
        closest = min((b - a for a, b in zip(times, times[1:])), default=math.inf)
        assert closest >= 0.25, f"{len(times)} forks, two of them {closest:.3f}s apart"
        assert sup.proc.poll() is None
    finally:
        sup.kill_all()
