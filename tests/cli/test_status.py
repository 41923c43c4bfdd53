"""`status` after a supervisor was killed (issue 12): stale once its heartbeat is older
than two intervals, its workers shown as of that heartbeat, times with their zone."""
import json
import os
import signal
from datetime import datetime, timedelta

import pytest
from conftest import run_cli, wait_until
from harness import supervisor_starter, wait_gone

from prefork import config as config_module
from prefork.jobs import new_job
from prefork.store import open_store

# Heartbeats every second; nobody prunes within the test (the killed supervisor stays
# "running" in the registry, as it does when no other supervisor is up to prune it).
REGISTRY = ("--heartbeat-interval", "1", "--supervisor-timeout", "600")


@pytest.fixture(params=["mysql", "sqlite"])
def queue_dsn(request):
    if request.param == "mysql":
        request.getfixturevalue("clean_db")
        return request.getfixturevalue("migrated")
    return request.getfixturevalue("sqlite_migrated")


def status(dsn, *args):
    result = run_cli("status", "--heartbeat-interval", "1", *args, dsn=dsn)   # status reads no other
    assert result.returncode == 0, result.stderr
    return result.stdout


def supervisors_by_pid(dsn):
    return {sup["pid"]: sup for sup in json.loads(status(dsn, "--json"))["supervisors"]}


def test_a_killed_supervisor_shows_stale_with_its_last_workers_as_of_then(tmp_path, queue_dsn):
    config = config_module.load({"dsn": queue_dsn}, environ={})
    store = open_store(config)
    try:
        job_id = store.enqueue(new_job("sleep", {"seconds": 120}))
    finally:
        store.close()
    with supervisor_starter(tmp_path, queue_dsn, "--app", "ledger_app", *REGISTRY) as start:
        doomed = start("--workers", "2", "--lease-seconds", "300")
        live = start("--workers", "1", "--queues", "other")
        doomed.wait_event("job_claimed", job_id=job_id)

        def busy_reported():
            sups = supervisors_by_pid(queue_dsn)
            children = sups.get(doomed.pid, {}).get("children", [])
            return sups if live.pid in sups and any(
                c.get("job_id") == job_id for c in children) else None

        before = wait_until(busy_reported, timeout=30, message="the busy worker reported")
        assert not before[doomed.pid]["stale"] and not before[live.pid]["stale"]
        children = [child.pid for child in doomed.children()]
        os.killpg(doomed.pid, signal.SIGKILL)
        wait_gone([doomed.pid] + children)

        sups = wait_until(lambda: (lambda s: s if s[doomed.pid]["stale"] else None)(
            supervisors_by_pid(queue_dsn)), timeout=30, message="the killed one stale")
        dead, alive = sups[doomed.pid], sups[live.pid]
        assert dead["heartbeat_age_s"] >= 2 and not alive["stale"]
        assert any(c.get("job_id") == job_id for c in dead["children"])   # as last reported
        for sup in (dead, alive):
            for name in ("started_at", "heartbeat_at"):
                assert datetime.fromisoformat(sup[name]).utcoffset() == timedelta(0), sup[name]
        heartbeat_at = datetime.fromisoformat(dead["heartbeat_at"])
        assert heartbeat_at < datetime.fromisoformat(alive["heartbeat_at"])

        lines = status(queue_dsn).splitlines()
        (dead_line,) = [line for line in lines if f":{doomed.pid} " in line]
        (alive_line,) = [line for line in lines if f":{live.pid} " in line]
        assert "STALE: no heartbeat for" in dead_line and "workers 2/2 as of" in dead_line
        assert "STALE" not in alive_line and "as of" in alive_line


def test_a_supervisor_is_stale_by_its_own_heartbeat_interval_not_the_readers(tmp_path,
                                                                             queue_dsn):
    """Issue 28: killed, a supervisor run with --heartbeat-interval 1 is stale once two of
    its own heartbeats are missed, to a `status` run with the default interval (5 s) and
    to one whose interval would wait twenty minutes."""
    with supervisor_starter(tmp_path, queue_dsn, "--app", "ledger_app", *REGISTRY) as start:
        doomed = start("--workers", "1")
        doomed.wait_event("supervisor_registered")
        children = [child.pid for child in doomed.children()]
        os.killpg(doomed.pid, signal.SIGKILL)
        wait_gone([doomed.pid] + children)

        def seen_by(*reader):
            result = run_cli("status", "--json", *reader, dsn=queue_dsn)
            assert result.returncode == 0, result.stderr
            (sup,) = json.loads(result.stdout)["supervisors"]
            return sup

        def stale_to_both():   # no flag: the default 5 s; and a reader of 600 s
            seen = [seen_by(), seen_by("--heartbeat-interval", "600")]
            return seen if all(sup["stale"] for sup in seen) else None

        seen = wait_until(stale_to_both, timeout=60, interval=0.5,
                          message="the killed supervisor stale to both readers")
        # The age is shown to a tenth: 2.04 s, stale, reads 2.0.
        assert all(sup["heartbeat_interval_s"] == 1.0 and sup["heartbeat_age_s"] >= 2
                   for sup in seen)
        (line,) = [line for line in run_cli("status", dsn=queue_dsn).stdout.splitlines()
                   if f":{doomed.pid} " in line]
        assert "STALE: no heartbeat for" in line


def test_status_columns_are_as_wide_as_their_longest_queue_name(queue_dsn):
    """Issue 28: a long queue name widens its column; every count stays under its title."""
    store = open_store(config_module.load({"dsn": queue_dsn}, environ={}))
    try:
        long_name = "prefork-doctor-ce75dc3e-and-then-some-more"
        for queue, count in (("default", 3), (long_name, 12)):
            for _ in range(count):
                store.enqueue(new_job("noop", queue=queue))
    finally:
        store.close()
    lines = status(queue_dsn).splitlines()
    header = next(line for line in lines if line.startswith("QUEUE "))
    rows = [line for line in lines if line.startswith(("default ", long_name))]
    assert len(rows) == 2
    ends = [header.index(title) + len(title) for title in
            ("READY", "DELAYED", "RESERVED", "DEAD", "CANCELLED", "DONE/1H", "JOBS/MIN",
             "OLDEST READY")]
    for row in rows:   # each count ends where its title does (right-aligned), after the name
        assert len(row) == len(header), (header, row)
        for end in ends:
            assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (header, row)
    assert header.index("READY") > len(long_name)


def title(pid):
    """A process's whole title (`ps` cuts it to its width)."""
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode().strip()


def test_the_master_title_counts_jobs_sent_to_dead_since_start_not_dead_jobs(tmp_path,
                                                                            migrated, clean_db):
    """A job that goes dead, is retried and goes dead again: the title says `dead 2` (jobs
    sent to dead since start), while `failed` lists one dead job."""
    with supervisor_starter(tmp_path, migrated, "--app", "ledger_app") as start:
        sup = start("--workers", "1")
        job_id = int(run_cli("enqueue", "permanent", dsn=migrated).stdout)
        wait_until(lambda: "done 0 dead 1 since start" in title(sup.pid), timeout=30)
        assert run_cli("retry", str(job_id), dsn=migrated).returncode == 0
        wait_until(lambda: "done 0 dead 2 since start" in title(sup.pid), timeout=30)
        listed = run_cli("failed", dsn=migrated).stdout.splitlines()[1:]
        assert [int(line.split()[0]) for line in listed] == [job_id]
