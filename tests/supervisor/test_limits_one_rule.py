"""One rule per job type for the whole cluster: two real supervisors that declare
different limits for one type (in their [command:TYPE] sections) both enforce the
one published last, in every claim, on SQLite and on MySQL in both dialects. What
ran at once, and how far apart the starts were, is read from the commands'
execution log; `status --json` must show the rule enforced."""
import json

import pytest
from conftest import run_cli, wait_until
from harness import supervisor_starter
from limits_chaos import most_at_once, read_runs

from prefork.jobs import new_job
from prefork.limits.rules import LimitRule

JOB_TYPE = "cmd.limited"
COMMAND_SCRIPT = """#!/bin/sh
echo "start $1 cmd.limited - $$ $(date +%s.%N)" >> "$2"
sleep "$3"
echo "end $1 cmd.limited - $$ $(date +%s.%N)" >> "$2"
"""
CASES = [("sqlite", None), ("mysql", "mariadb"), ("mysql", "mysql")]
IDS = ["sqlite", "mysql-mariadb_dialect", "mysql-mysql_dialect"]


@pytest.fixture
def queue(request, kind):
    """(dsn, store) of an empty, migrated queue of this kind."""
    dsn = request.getfixturevalue("migrated" if kind == "mysql" else "sqlite_migrated")
    return dsn, request.getfixturevalue("store" if kind == "mysql" else "sqlite_store")()


def config_text(tmp_path, limit_lines):
    script = tmp_path / "run.sh"
    script.write_text(COMMAND_SCRIPT)
    script.chmod(0o755)
    return f"[command:{JOB_TYPE}]\nargv = {script} {{n}} {{log}} {{seconds}}\n{limit_lines}\n"


def start_both(start, tmp_path, beta_limit, alpha_limit):
    """beta first, then alpha, each publishing its own rule for the type: alpha's is
    the one published last."""
    beta = start("--workers", "4", name="beta", config_text=config_text(tmp_path, beta_limit))
    beta.wait_event("limits_published", timeout=60)
    alpha = start("--workers", "2", name="alpha",
                  config_text=config_text(tmp_path, alpha_limit))
    alpha.wait_event("limits_published", timeout=60)
    return beta, alpha


def enqueue(store, log, count, seconds):
    return [store.enqueue(new_job(JOB_TYPE, {"n": n, "log": str(log), "seconds": seconds},
                                  max_attempts=20))
            for n in range(1, count + 1)]


def status_rows(dsn):
    """The LIMITS rows of `status --json` for the type."""
    result = run_cli("status", "--json", dsn=dsn)
    assert result.returncode == 0, result.stderr
    return [row for row in json.loads(result.stdout)["limits"] if row["type"] == JOB_TYPE]


def sample_status_until_done(dsn, store, job_ids, timeout):
    """Every LIMITS row of the type that `status` showed until the jobs were done."""
    seen = []

    def done():
        seen.extend(status_rows(dsn))
        return all(store.get(job_id)["status"] == "done" for job_id in job_ids)
    wait_until(done, timeout=timeout, interval=0.1, message=f"{len(job_ids)} jobs done")
    return seen


@pytest.mark.parametrize("kind, dialect", CASES, ids=IDS, indirect=["dialect"])
def test_a_claim_enforces_the_rule_published_last_not_its_own(queue, request, kind):
    """A claimer that declares 3 at once, after another store published 1: one starts,
    none while it runs, the next once it is done."""
    _, store = queue
    other = request.getfixturevalue("store" if kind == "mysql" else "sqlite_store")()
    declared = {JOB_TYPE: LimitRule(JOB_TYPE, concurrency=3)}
    store.publish_limits(list(declared.values()), [JOB_TYPE])
    ids = [store.enqueue(new_job(JOB_TYPE)) for _ in range(4)]
    other.publish_limits([LimitRule(JOB_TYPE, concurrency=1)], [JOB_TYPE])

    def claim():
        return store.claim_limited(["default"], "one-rule:1", 30, 4, None, declared)[0]
    [first] = claim()
    assert first.id == ids[0] and claim() == []
    assert store.complete(first)
    assert [job.id for job in claim()] == ids[1:2]


@pytest.mark.parametrize("kind, dialect", CASES, ids=IDS, indirect=["dialect"])
def test_the_concurrency_published_last_holds_for_both_supervisors(tmp_path, queue, kind):
    """beta declares 3 at once, alpha (started later) 1: never more than one runs,
    though beta's four workers could run three; status says limit 1, running 1."""
    dsn, store = queue
    log = tmp_path / "exec.log"
    with supervisor_starter(tmp_path, dsn, "--poll-interval", "0.5") as start:
        beta, alpha = start_both(start, tmp_path, "concurrency = 3", "concurrency = 1")
        [replaced] = alpha.events("limit_replaced")   # alpha's log says whose rule went
        assert (replaced["job_type"], replaced["replaced"], replaced["now"]) == \
            (JOB_TYPE, "concurrency 3", "concurrency 1")
        assert beta.events("limit_replaced") == []
        jobs = enqueue(store, log, 8, seconds=0.4)
        seen = sample_status_until_done(dsn, store, jobs, timeout=120)
    runs = read_runs(log)
    assert len(runs) == 8
    assert most_at_once(runs) == 1
    busy = [row for row in seen if row["running"]]
    assert busy, seen   # status saw the type's jobs running
    assert {(row["running"], row["limit"]) for row in busy} == {(1, 1)}, busy


@pytest.mark.parametrize("kind, dialect", CASES, ids=IDS, indirect=["dialect"])
def test_the_rate_published_last_holds_for_both_supervisors(tmp_path, queue, kind):
    """beta declares 50 starts a second, alpha (started later) 1: the starts come about
    a second apart (any three span at least one second), and status says 1/s."""
    dsn, store = queue
    log = tmp_path / "exec.log"
    with supervisor_starter(tmp_path, dsn, "--poll-interval", "0.5") as start:
        start_both(start, tmp_path, "rate = 50/s", "rate = 1/s")
        jobs = enqueue(store, log, 5, seconds=0.05)
        wait_until(lambda: status_rows(dsn), timeout=30, message="the type in status")
        assert {row["rate"] for row in status_rows(dsn)} <= {"1/s"}
        wait_until(lambda: all(store.get(job_id)["status"] == "done" for job_id in jobs),
                   timeout=120, message="5 jobs done")
    starts = sorted(run.start for run in read_runs(log))
    assert len(starts) == 5
    spans = [later - first for first, later in zip(starts, starts[2:])]
    assert min(spans) >= 1.0, f"starts {starts}: three within {min(spans):.2f} s at 1/s"
