"""`prefork-queue bench` as a user runs it, small, against the test database: the
report is complete and sane, and nothing of the bench is left behind (rows,
processes), also after Ctrl-C. Speed is never asserted here."""
import json
import re
import signal
import subprocess
import sys

import psutil
import pytest
from conftest import cli_env, run_cli, scalar, wait_until

import pymysql.cursors

from prefork.bench.report import MYSQL_ONLY, ROW_KEYS, render_table
from prefork.bench.scale_parts import CLAIMERS
from prefork.bench.scale_report import DESIGN_COLUMNS, SCALE_KEYS, SCENARIOS
from prefork.settings import SETTINGS
from prefork.bench.peers import PEERS
from prefork.store.mysql.bench import BENCH_BARE_INSERT, PEERS_DATABASE

CLAIMER = next(setting for setting in SETTINGS if setting.name == "claimer")
SCRATCH_ROWS = "SELECT COUNT(*) FROM prefork_jobs WHERE queue LIKE 'bench-%%'"


def processes_of(queue):
    """Live processes whose command line or title names the scratch queue."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if queue in " ".join(process.info["cmdline"] or []) and \
                    process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            pass
    return found


def assert_sane_row(row, workers, backend="mysql"):
    assert row["workers"] == workers
    for key in ROW_KEYS:
        if backend == "mysql" or key not in MYSQL_ONLY:
            assert row[key] is not None, key
            assert row[key] >= 0 if key == "idle_stmts_per_s" else row[key] > 0, key
    assert row["pickup_p50_ms"] <= row["pickup_p99_ms"]
    assert row["polled_pickup_p50_ms"] <= row["polled_pickup_p99_ms"]
    assert row["child_uss_mib"] <= row["child_rss_mib"]


def interrupted(dsn, args, started, timeout):
    """Run `prefork-queue bench ARGS` until started() is true, then Ctrl-C it: (its exit
    code, stdout, stderr, what started() answered)."""
    bench = subprocess.Popen([sys.executable, "-m", "prefork", "bench", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=cli_env(dsn))
    try:
        seen = wait_until(started, timeout=timeout, message="the bench's scenario to start")
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    return bench.returncode, out, err, seen


def test_bench_reports_every_column_and_cleans_up(migrated, clean_db):
    result = run_cli("bench", "--workers", "2", "--jobs", "300", "--pickups", "10", "--json",
                     "--cross-host", dsn=migrated, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == "mysql" and report["jobs"] == 300
    assert report["columns"] == list(ROW_KEYS) and report["mysql_only"] == []
    [row] = report["rows"]
    assert_sane_row(row, 2)
    # Explicit COMMITs only (Com_commit): the baseline's two per job; ours one per
    # claim transaction, and claims are batched.
    assert 0 < row["commits_per_job"] < row["baseline_commits_per_job"]
    assert row["baseline_commits_per_job"] >= 1.5
    assert row["ceiling_ratio"] == pytest.approx(row["ours_jobs_per_s"] / row["ceiling_jobs_per_s"])
    # --cross-host: the same pickups with the supervisor's same-host doorbell off.
    cross = report["cross_host"]
    assert (cross["workers"], cross["pickups"]) == (2, 10)
    assert 0 < cross["pickup_p50_ms"] <= cross["pickup_p99_ms"]
    assert cross["idle_stmts_per_s"] > 0
    assert "cross-host pickup (" in render_table(report)
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert processes_of(report["queue"]) == []


def test_bench_on_sqlite_prints_the_table_and_says_what_is_mysql_only(sqlite_migrated):
    result = run_cli("bench", "--workers", "1,2", "--jobs", "100", "--pickups", "5",
                     dsn=sqlite_migrated, timeout=300)
    assert result.returncode == 0, result.stderr
    header, first, second = result.stdout.splitlines()[:3]
    assert header.split()[:3] == ["workers", "enqueue/s", "ours"]
    assert first.split()[0] == "1" and second.split()[0] == "2"
    assert "MySQL-only" in result.stdout
    # A line per phase on stderr (not a terminal here, so no bar): contender, worker
    # count, jobs so far and time elapsed.
    phases = [re.sub(r"\d+ s elapsed", "T s elapsed", line)
              for line in result.stderr.splitlines()]
    assert phases == [f"prefork-queue bench: {phase} ({done} jobs so far, T s elapsed)"
                      for phase, done in [("1 worker: ours, 100 jobs", 0),
                                          ("1 worker: ours, 10 pickups", 100),
                                          ("2 workers: ours, 100 jobs", 110),
                                          ("2 workers: ours, 10 pickups", 210),
                                          ("done", 220)]], result.stderr
    as_json = run_cli("bench", "--workers", "1", "--jobs", "50", "--pickups", "3", "--json",
                      dsn=sqlite_migrated, timeout=300)
    report = json.loads(as_json.stdout)
    assert_sane_row(report["rows"][0], 1, backend="sqlite")
    assert all(report["rows"][0][key] is None for key in MYSQL_ONLY)
    assert report["mysql_only"] == list(MYSQL_ONLY)


def test_bench_limits_reports_both_scenarios_and_the_limits_held(backend, db, request):
    dsn = request.getfixturevalue("migrated" if backend == "mysql" else "sqlite_migrated")
    result = run_cli("bench", "--workers", "2", "--jobs", "200", "--pickups", "3", "--limits",
                     "--rate", "20/s", "--rate-seconds", "3", "--json", dsn=dsn, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_sane_row(report["rows"][0], 2, backend)   # the plain row as without --limits
    keyed, rated = report["limits"]["concurrency"], report["limits"]["rate"]
    assert (keyed["workers"], keyed["jobs"], keyed["keys"], keyed["limit"]) == (2, 200, 100, 1)
    assert keyed["jobs_per_s"] > 0 and keyed["unlimited_jobs_per_s"] > 0
    assert keyed["ratio"] == pytest.approx(keyed["jobs_per_s"] / keyed["unlimited_jobs_per_s"])
    # A slot is a reserved job: no poll of the bench saw two of one key reserved.
    assert keyed["most_reserved_per_key"] <= 1
    assert (rated["workers"], rated["jobs"], rated["rate"]) == (2, 60, "20/s")
    assert rated["jobs_per_s"] > 0 and rated["achieved_per_s"] > 0
    assert rated["achieved_pct"] == pytest.approx(100 * rated["achieved_per_s"] / 20)
    # The rate held: a new group's bucket holds one token, so 60 starts take 59/20 s
    # at least from the enqueue's commit (one token more for the two clocks' reading).
    assert rated["jobs"] - 1 <= 20 * (rated["first_start_s"] + rated["starts_span_s"]) + 1
    mysql = backend == "mysql"
    for figures, key in ((keyed, "stmts_per_job"), (keyed, "unlimited_stmts_per_job"),
                         (rated, "stmts_per_job")):
        assert (figures[key] > 0) if mysql else (figures[key] is None), key
    # The scenarios' rows, published rules and groups are gone.
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue LIKE %s", ("bench-%",)) == 0
    assert db.scalar("SELECT COUNT(*) FROM prefork_limits") == 0
    assert db.scalar("SELECT COUNT(*) FROM prefork_limit_groups") == 0
    assert processes_of(report["queue"]) == []
    assert "limits: 200 jobs over 100 keys, 1 per key" in result.stderr
    # The text report's section (after the table), from the same figures, unwrapped.
    section = " ".join(line.strip() for line in render_table(report).split("\n\n")[1].splitlines())
    assert re.fullmatch(r"limits, 2 workers: - concurrency 1 per key over 100 keys, 200 jobs: "
                        r"[\d,]+ jobs/s = [\d.]+x the same jobs without the limit .*"
                        r" - rate 20/s, a backlog of 60 jobs: started at [\d.,]+/s = "
                        r"[\d.]+% of the rate .*", section), section


def test_bench_scale_reports_a_row_per_scenario_against_its_reference(migrated, clean_db):
    result = run_cli("bench", "--workers", "1", "--jobs", "200", "--pickups", "2", "--scale",
                     "--slow-jobs", "24", "--delayed", "300", "--backlog", "2000", "--json",
                     dsn=migrated, timeout=900)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_sane_row(report["rows"][0], 1)   # the plain row as without --scale
    by_scenario = {}
    for row in report["scale"]:
        by_scenario.setdefault(row["scenario"], []).append(row)
    assert list(by_scenario) == list(SCENARIOS)
    for name, scenario_rows in by_scenario.items():
        for row in scenario_rows:
            assert set(SCALE_KEYS) <= set(row), name
            assert row["jobs_per_s"] > 0, name
            if SCENARIOS[name][1] is None or row.get("reference", "") is None:
                # fork per job: no reference; enqueue one: no peer installed
                assert row["ratio"] is None and row["reference_jobs_per_s"] is None
            else:
                assert row["ratio"] == pytest.approx(row["jobs_per_s"]
                                                     / row["reference_jobs_per_s"])
    rows = {name: scenario_rows[0] for name, scenario_rows in by_scenario.items()}
    for name in set(SCENARIOS) - set(DESIGN_COLUMNS):   # a row each, no design chosen
        assert len(by_scenario[name]) == 1, name
        assert (rows[name]["claimer"], rows[name]["target"], rows[name]["target_met"]) == \
            (None, SCENARIOS[name][2], None), name
    assert [rows[name]["jobs"] for name in SCENARIOS] == [200, 200, 200, 24, 8, 24, 200, 200,
                                                          200, 200]
    assert_many_workers_rows(by_scenario["many_workers"], CLAIMERS)
    assert_effects_rows(by_scenario["effects"], CLAIMERS)
    assert {row["jobs"] for row in by_scenario["many_workers"] + by_scenario["effects"]} == {200}
    assert rows["many_supervisors"]["supervisors"] == 4
    assert rows["slow_jobs"]["reference_jobs_per_s"] == pytest.approx(8 / 0.05)
    assert rows["slow_jobs_1s"]["reference_jobs_per_s"] == pytest.approx(8 / 1.0)
    assert rows["delayed"]["delayed"] == 300
    for name in ("many_supervisors", "delayed"):   # the idle load of each setup
        for prefix in ("", "reference_"):
            assert rows[name][f"{prefix}idle_stmts_per_s"] > 0, name
            assert rows[name][f"{prefix}idle_rows_read_per_s"] >= 0, name
    # The backlog: 2,000 jobs over 20 queues, a quarter of them in the 5 worked queues;
    # half of those counted.
    backlog = report["backlog"]
    assert (backlog["rows"], backlog["queues"], backlog["priorities"], backlog["worked_queues"],
            backlog["workers"], backlog["jobs"]) == (2000, 20, 5, 5, 1, 200)
    assert backlog["jobs_per_s"] > 0 and backlog["disk_reads_per_job"] >= 0
    empty = report["rows"][0]["ours_jobs_per_s"]
    assert backlog["ratio"] == pytest.approx(backlog["jobs_per_s"] / empty)
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert scalar(clean_db, "SELECT COUNT(*) FROM information_schema.tables"
                            " WHERE table_schema = DATABASE()"
                            " AND table_name = 'prefork_bench_effects'") == 0
    assert processes_of(report["queue"]) == []
    assert "through a backlog of 2,000 ready jobs" in render_table(report)
    section = render_table(report).split("scale (--scale)")[1].split("\n\n")[0]
    assert [line.split(":")[0] for line in section.splitlines() if line.startswith("- ")] == \
        ["- " + name.replace("_", " ") for name in SCENARIOS]
    # The designs' tables: a header and a line per row, each naming its target and
    # whether it was met.
    table = [line.split() for line in section.splitlines() if line.startswith("    ")]
    assert [line[:2] for line in table] == (
        [["workers", "claimer"]] + [[str(workers), claimer] for workers in (8, 32, 64)
                                    for claimer in CLAIMERS]
        + [["workers", "claimer"]] + [[str(workers), claimer] for workers in (8, 32)
                                      for claimer in CLAIMERS])
    assert {line[-1] for line in table if line[0] != "workers"} <= {"met", "missed"}


def assert_many_workers_rows(many_workers, claimers):
    """One per worker count and design, in that order, each against its design's 8
    workers and the ceiling at its count, checking its target."""
    assert [(row["workers"], row["claimer"]) for row in many_workers] == \
        [(workers, claimer) for workers in (8, 32, 64) for claimer in claimers]
    base = {row["claimer"]: row["jobs_per_s"] for row in many_workers if row["workers"] == 8}
    ceilings = {}
    for row in many_workers:
        assert row["reference_jobs_per_s"] == base[row["claimer"]]
        assert row["ceiling_ratio"] == pytest.approx(row["jobs_per_s"] / row["ceiling_jobs_per_s"])
        ceilings.setdefault(row["workers"], row["ceiling_jobs_per_s"])
        assert row["ceiling_jobs_per_s"] == ceilings[row["workers"]]   # one ceiling per count
        assert row["ceiling_of_base"] == pytest.approx(ceilings[row["workers"]] / ceilings[8])
        least, figure = {8: (1.0, row["ceiling_ratio"]), 32: (0.8, row["ratio"]),
                         64: (0.7, row["ratio"])}[row["workers"]]
        against = "the ceiling" if row["workers"] == 8 else "8 workers"
        assert (row["target"], row["target_met"]) == (f">= {least}x of {against}",
                                                      figure >= least), row


def assert_effects_rows(effects, claimers):
    """One per worker count and design, in that order, each against the commit rate of
    as many connections, checking its target."""
    assert [(row["workers"], row["claimer"]) for row in effects] == \
        [(workers, claimer) for workers in (8, 32) for claimer in claimers]
    commits = {}
    for row in effects:
        commits.setdefault(row["workers"], row["reference_jobs_per_s"])
        assert row["reference_jobs_per_s"] == commits[row["workers"]] > 0
        assert row["ratio"] == pytest.approx(row["jobs_per_s"] / row["reference_jobs_per_s"])
        assert (row["target"], row["target_met"]) == (">= 0.7x of the commit rate",
                                                      row["ratio"] >= 0.7), row
        assert row["stmts_per_job"] > 0


def test_bench_scale_runs_only_the_claimer_given(migrated, clean_db):
    """--claimer (the setting) chooses one design for the designs' rows; without it
    both run (the test above)."""
    assert [CLAIMER.parse(name) for name in CLAIMERS] == list(CLAIMERS)
    result = run_cli("bench", "--workers", "1", "--jobs", "30", "--pickups", "2", "--scale",
                     "effects", "--claimer", "supervisor", "--json", dsn=migrated, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [(row["workers"], row["claimer"], row["jobs"]) for row in report["scale"]] == \
        [(8, "supervisor", 30), (32, "supervisor", 30)]
    assert_effects_rows(report["scale"], ("supervisor",))
    phases = [line for line in result.stderr.splitlines() if "writing a row each" in line]
    assert len(phases) == 2 and all("claimer supervisor" in line for line in phases), phases
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert processes_of(report["queue"]) == []


def test_bench_workflows_reports_the_group_and_the_chain_and_cleans_up(backend, db, request):
    dsn = request.getfixturevalue("migrated" if backend == "mysql" else "sqlite_migrated")
    result = run_cli("bench", "--workers", "2", "--jobs", "100", "--pickups", "2", "--workflows",
                     "--group-size", "200", "--groups", "2", "--chain-steps", "30", "--json",
                     dsn=dsn, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_sane_row(report["rows"][0], 2, backend)   # the plain row as without --workflows
    group, chain = report["workflows"]["group"], report["workflows"]["chain"]
    assert (group["workers"], group["members"], group["groups"]) == (2, 200, 2)
    assert group["jobs_per_s"] > 0 and group["plain_jobs_per_s"] > 0
    assert group["ratio"] == pytest.approx(group["jobs_per_s"] / group["plain_jobs_per_s"])
    assert group["enqueue_per_s"] > 0 and group["plain_enqueue_per_s"] > 0
    # Each callback started after its last member was written done (never early), and
    # the p50 is one of them.
    assert len(group["callback_delays_ms"]) == 2 and min(group["callback_delays_ms"]) > 0
    assert group["callback_delay_p50_ms"] in group["callback_delays_ms"]
    assert (chain["workers"], chain["steps"]) == (2, 30) and chain["steps_per_s"] > 0
    # Each step started after the one before it was written done.
    assert 0 < chain["step_delay_p50_ms"] <= chain["step_delay_p99_ms"]
    mysql = backend == "mysql"
    for figures, key in ((group, "stmts_per_job"), (group, "plain_stmts_per_job"),
                         (chain, "stmts_per_step")):
        assert (figures[key] > 0) if mysql else (figures[key] is None), key
    for phase in ("workflows: 200 plain jobs (1 of 2)", "workflows: a group of 200 (2 of 2)",
                  "workflows: a chain of 30 steps"):
        assert phase in result.stderr
    section = " ".join(line.strip() for line in
                       render_table(report).split("workflows, 2 workers")[1].split("\n\n")[0]
                       .splitlines())
    assert re.fullmatch(r", each against its reference in the same run: - group of 200 no-op "
                        r"members and a callback, 2 groups: members [\d,]+ jobs/s = [\d.]+x 200 "
                        r"plain jobs .* after its last member was written done\. Targets .*"
                        r" - chain of 30 steps: [\d,.]+ steps/s; a step started [\d.]+ ms .*",
                        section), section
    assert db.scalar("SELECT COUNT(*) FROM prefork_jobs WHERE queue LIKE %s", ("bench-%",)) == 0
    assert db.scalar("SELECT COUNT(*) FROM prefork_workflows") == 0
    assert processes_of(report["queue"]) == []


def test_ctrl_c_in_the_workflow_scenarios_removes_their_workflows(migrated, clean_db):
    code, _, err, _ = interrupted(
        migrated, ["--workers", "1", "--jobs", "20", "--pickups", "1", "--workflows",
                   "--group-size", "20000", "--json"],
        lambda: scalar(clean_db, "SELECT COUNT(*) FROM prefork_workflows"), 300)
    assert code == 130 and "Traceback" not in err, err
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert scalar(clean_db, "SELECT COUNT(*) FROM prefork_workflows") == 0


def test_bench_enqueue_one_names_ours_each_installed_peer_and_the_fastest(migrated, clean_db):
    """The shape of the row (never its speed): ours, and each peer measured, failed
    with its reason, or not installed; the fastest measured one is the reference."""
    result = run_cli("bench", "--workers", "1", "--jobs", "30", "--pickups", "2", "--scale",
                     "enqueue_one", "--json", dsn=migrated, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    [row] = report["scale"]
    assert (row["scenario"], row["jobs"], row["target"]) == ("enqueue_one", 30, ">= 1.5x")
    assert row["jobs_per_s"] > 0 and row["client_cpu_us_per_call"] > 0
    assert row["stmts_per_job"] >= 1   # the INSERT (server-wide: others' too)
    assert len(row["ours_rounds"]) == row["rounds"] == 3
    names = [peer["name"] for peer in row["peers"]]
    assert names == [name for name in PEERS if name in names]   # in PEERS' order
    assert sorted(names + row["peers_not_installed"]) == sorted(PEERS)
    timed = [peer for peer in row["peers"] if "error" not in peer]
    for peer in timed:
        assert peer["jobs_per_s"] > 0 and peer["client_cpu_us_per_call"] > 0, peer
    if timed:
        fastest = max(timed, key=lambda peer: peer["jobs_per_s"])
        assert (row["reference"], row["reference_jobs_per_s"]) == \
            (fastest["name"], fastest["jobs_per_s"])
        assert row["ratio"] == pytest.approx(row["jobs_per_s"] / fastest["jobs_per_s"])
    else:
        assert row["reference"] is None and row["ratio"] is None
    line = render_table(report).split("scale (--scale)")[1]
    assert re.search(r"- enqueue one: Client.enqueue in a loop, 30 jobs: [\d,]+ jobs/s, [\d,]+ "
                     r"us\s+client\s+CPU/call", line), line
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert scalar(clean_db, "SELECT COUNT(*) FROM information_schema.schemata"
                            " WHERE schema_name = %s", (PEERS_DATABASE,)) == 0


def test_the_bulk_enqueues_reference_is_one_multi_row_insert():
    # PyMySQL folds an executemany into multi-row INSERTs only for VALUES of bare
    # placeholders: otherwise the reference would be a statement per row too.
    assert pymysql.cursors.RE_INSERT_VALUES.match(BENCH_BARE_INSERT)


def test_ctrl_c_stops_the_bench_and_removes_its_rows_and_processes(migrated, clean_db):
    def running():
        queue = scalar(clean_db, "SELECT MIN(queue) FROM prefork_jobs WHERE queue LIKE 'bench-%%'")
        if queue:   # its batch enqueued
            assert processes_of(queue), "the supervisor should be running"
        return queue

    code, out, err, queue = interrupted(migrated, ["--workers", "2", "--jobs", "20000", "--json"],
                                        running, 60)
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert out == ""
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    wait_until(lambda: not processes_of(queue), timeout=10, message="bench processes to end")


def test_bench_measures_a_clusters_topologies_against_the_plain_server(migrated, clean_db):
    """The test server named twice stands for a cluster of two nodes: the run, its
    report and the clean-up are the same (the figures of a real cluster: README)."""
    result = run_cli("bench", "--workers", "1,2", "--jobs", "200", "--pickups", "2", "--json",
                     "--cluster-dsn", migrated, "--cluster-dsn", migrated, dsn=migrated,
                     timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    topologies = report["topologies"]
    assert (topologies["supervisors"], topologies["workers"], topologies["jobs"]) == (2, 2, 200)
    single, one_writer, every_node = topologies["rows"]
    assert [row["topology"] for row in topologies["rows"]] == [
        "single server", "one writer node", "writers on every node"]
    assert [row["target"] for row in topologies["rows"]] == [None, 0.8, 0.5]
    for row in topologies["rows"]:
        assert row["jobs_per_s"] > 0
        assert row["ratio"] == pytest.approx(row["jobs_per_s"] / single["jobs_per_s"])
    for phase in ("single server: 2 x 2 workers", "writers on every node: 2 x 2 workers"):
        assert phase in result.stderr
    assert "cluster topologies, 2 supervisors of 2 workers, 200 jobs: single server" \
        in render_table(report).replace("\n  ", " ")
    assert scalar(clean_db, SCRATCH_ROWS) == 0
    assert processes_of(report["queue"]) == []
    one_node = run_cli("bench", "--cluster-dsn", migrated, dsn=migrated)
    assert one_node.returncode == 2 and "at least 2" in one_node.stderr


def test_bench_refuses_bad_worker_counts_and_mysql_only_flags_on_sqlite(sqlite_migrated):
    bad = run_cli("bench", "--workers", "2,0", dsn=sqlite_migrated)
    assert bad.returncode == 2 and "at least 1" in bad.stderr
    mysql_only = run_cli("bench", "--done-rows", "1000", dsn=sqlite_migrated)
    assert mysql_only.returncode == 2 and "MySQL-only" in mysql_only.stderr
    node = "mysql://root@127.0.0.1:3306/pq_node"
    for flag in (["--scale"], ["--backlog", "100"], ["--cluster-dsn", node, "--cluster-dsn", node]):
        refused = run_cli("bench", *flag, dsn=sqlite_migrated)
        assert refused.returncode == 2 and f"{flag[0]} is MySQL-only" in refused.stderr
        assert "Traceback" not in refused.stderr
    bad_rate = run_cli("bench", "--limits", "--rate", "5/x", dsn=sqlite_migrated)
    assert bad_rate.returncode == 2 and "invalid rate '5/x'" in bad_rate.stderr
    no_groups = run_cli("bench", "--workflows", "--groups", "0", dsn=sqlite_migrated)
    assert no_groups.returncode == 2 and "must be at least 1" in no_groups.stderr
    unknown = run_cli("bench", "--scale", "effects,fork", dsn=sqlite_migrated)
    assert unknown.returncode == 2 and "no such scale scenario: fork" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    not_mysql = run_cli("bench", "--cluster-dsn", "sqlite:///other.db", dsn=sqlite_migrated)
    assert not_mysql.returncode == 2 and "scheme must be mysql://" in not_mysql.stderr
    assert "Traceback" not in (bad.stderr + mysql_only.stderr + bad_rate.stderr + unknown.stderr
                               + not_mysql.stderr + no_groups.stderr)
