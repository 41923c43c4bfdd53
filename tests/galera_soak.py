"""The chaos soak's ledger run with writers on every node of a Galera cluster.

One supervisor per node (its DSN names that node: what a round-robin load
balancer gives), ledger jobs (an effect written in job.transaction()) mixed
with plain ones (tests/chaos.py, tests/apps/chaos_app.py), then chaos.py's
audit plus what only several writers can break: certification failures seen
by the handlers (1213 at commit, 1047, 1180), children that died of them
(worker_fatal), jobs run twice, dead jobs whose effect had committed.

With `kill_node`, that node is SIGKILLed once the run is under way and
restarted `down_seconds` later (it rejoins by IST); its supervisor keeps
trying its own node meanwhile, the other two go on.

measure_topologies(): the bench's topologies (`prefork-queue bench
--cluster-dsn`): jobs/s of no-op jobs (one supervisor per node's worth) on a
plain single server, then on the cluster with every supervisor on one node,
then with one supervisor per node: each cluster figure as a ratio of the single
server's, measured in the same run.

    python tests/galera_soak.py [--jobs 1000] [--kill-node 1]   # a cluster of its own
    python tests/galera_soak.py --topologies [--jobs 3000]
"""
import argparse
import dataclasses
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from chaos import (
    Database,
    Scenario,
    SoakSettings,
    audit_ledger,
    count_reexecutions,
    enqueue_mixed,
)
from polling import poll_until
from throwaway_db import ThrowawayMariaDB

from prefork import config as config_module
from prefork.bench.topologies import TopologyPlan, run_topologies
from prefork.progress import Progress

FATAL_EVENTS = ("worker_fatal", "worker_boot_failed")
ERROR_CODE = re.compile(r"Error \(?(\d{4})")   # "OperationalError 1213: ..."
DEAD_WITH_EFFECT = ("SELECT j.id, j.last_error FROM prefork_jobs j JOIN chaos_ledger l"
                    " ON l.idempotency_key = j.idempotency_key"
                    " WHERE j.queue = %s AND j.status = 'dead'")


@dataclass
class MultiWriterSettings(SoakSettings):
    """Chaos settings without the chaos: the run's faults are the cluster's own."""
    jobs: int = 500
    plain_jobs: int = 500
    workers: int = 4                   # per supervisor, one supervisor per node
    chaos_seconds: float = 15.0        # sizes the handlers' work (SoakSettings.work_ms)
    # Longer than a dead node's eviction (evs.inactive_timeout, 6 s), during which the
    # cluster holds every commit: a worker whose lease is not extended for half a
    # lease gives its job up (worker/parent_pulse.py), which a shorter lease would make
    # it do on the live nodes too, and so re-run jobs the kill did not cut.
    lease_seconds: float = 15.0
    hard_timeout: float = 15.0
    kill_node: int = None              # SIGKILL this node mid-run, restart it
    kill_after: float = 4.0            # seconds into the run
    down_seconds: float = 4.0
    drain_timeout: float = 120.0

    @classmethod
    def full(cls, **changes):
        return dataclasses.replace(cls(jobs=2500, plain_jobs=2500, chaos_seconds=60.0,
                                       drain_timeout=600.0), **changes)


def run_multi_writer(cluster, settings, workdir=None, log=None):
    """Returns chaos.Report: figures and checks."""
    db = Database(cluster.dsn(0), environ={})
    fault = f", node {settings.kill_node} killed and restarted" \
        if settings.kill_node is not None else ""
    with Scenario(db, "g", f"galera: a supervisor on each of {cluster.size} nodes{fault}",
                  settings, workdir, log) as scenario:
        report, queue = scenario.report, scenario.queue
        keys, plain_keys = enqueue_mixed(scenario, settings)
        report.figures.update(jobs=settings.jobs, plain_jobs=settings.plain_jobs,
                              workers=f"{settings.workers} x {cluster.size}")
        sups = [scenario.supervisor(f"node{index}", settings.workers, dsn=cluster.dsn(index))
                for index in range(cluster.size)]
        started = time.monotonic()
        node_back = None
        if settings.kill_node is not None:
            node_back = _kill_and_restart(cluster, db, queue, settings, started, scenario.log)
        try:
            poll_until(lambda: not db.unfinished(queue), settings.drain_timeout,
                       interval=0.2, message="the queue to empty")
        except TimeoutError:
            pass
        unfinished = db.unfinished(queue)
        report.figures["drain (s)"] = round(time.monotonic() - started, 1)
        report.check("the supervisors emptied the queue", not unfinished,
                     f"{unfinished} jobs still ready or reserved")
        alive = [sup.alive() for sup in sups]
        codes = scenario.stop_all()
        report.check("every supervisor survived and exited 0 on SIGTERM",
                     all(alive) and codes == [0] * len(sups), f"alive {alive}, exits {codes}")
        audit_ledger(report, db, scenario.run, queue, keys, plain_keys)
        exec_runs = scenario.executions()
        count_reexecutions(report, exec_runs)
        _audit_cluster(report, db, queue, sups, exec_runs, settings, node_back)
        scenario.check_no_leftovers()
    return report


def _kill_and_restart(cluster, db, queue, settings, started, log):
    """SIGKILL the node once the run is under way, start it again, wait until it is
    Synced; the wall time it was back."""
    poll_until(lambda: time.monotonic() - started >= settings.kill_after, 60, interval=0.05)
    log(f"kill -9 node {settings.kill_node}")
    cluster.kill(settings.kill_node)
    poll_until(lambda: time.monotonic() - started >= settings.kill_after
               + settings.down_seconds, 60, interval=0.05)
    cluster.restart(settings.kill_node)
    log(f"node {settings.kill_node} Synced again")
    return time.time()


def _audit_cluster(report, db, queue, sups, exec_runs, settings, node_back):
    events = [event for sup in sups for event in sup.events()]
    fatal = [event for event in events if event.get("event") in FATAL_EVENTS]
    codes = Counter(found for event in events
                    for found in ERROR_CODE.findall(str(event.get("error", ""))))
    report.figures["error codes in the logs"] = dict(codes)
    report.figures["conflicts released uncharged"] = sum(
        1 for event in events if event.get("event") == "job_conflict_released")
    report.figures["worker exits"] = Counter(event.get("reason", "?")[:40] for event in events
                                             if event.get("event") == "worker_exited")
    report.figures["worker_fatal"] = len(fatal)
    dead = db.query(DEAD_WITH_EFFECT, (queue,))
    report.check("no dead job whose effect committed", not dead, f"{dead[:5]}")
    runs = Counter(run[4] for run in exec_runs)
    again = sorted(key for key, count in runs.items() if count > 1)
    if settings.kill_node is None:
        report.check("no worker crash (worker_fatal)", not fatal, f"{fatal[:3]}")
        report.check("no job ran twice", not again, f"{len(again)}: {again[:5]}")
        return
    # With a node killed: a re-run only of a job whose earlier run was by the killed
    # node's supervisor (its run was cut), never two runs by the survivors.
    victim_pids = sups[settings.kill_node].spawned_pids()
    by_key = {}
    for when, pid, _, _, key in sorted(exec_runs):
        by_key.setdefault(key, []).append(pid)
    unexplained = [key for key in again if not any(pid in victim_pids
                                                   for pid in by_key[key][:-1])]
    report.check("re-runs only of jobs cut by the kill", not unexplained,
                 f"{len(unexplained)} re-run of jobs first run on live nodes: {unexplained[:5]}")
    late = [run for run in exec_runs if run[0] > node_back]
    report.figures["runs after the node was back"] = len(late)


def measure_topologies(cluster, settings, workdir=None, log=None):
    """({topology: jobs/s}, {topology: its ratio of the single server's}): the bench's
    topologies (prefork/bench/topologies.py, `prefork-queue bench --cluster-dsn`),
    cluster.size supervisors of settings.workers, settings.plain_jobs no-op jobs,
    on this cluster and a throwaway single server."""
    with ThrowawayMariaDB(database="pq_single") as single:
        for dsn in (single.dsn, cluster.dsn(0)):
            Database(dsn, environ={}).prepare()   # the schema
        plan = TopologyPlan([cluster.dsn(index) for index in range(cluster.size)],
                            settings.workers, settings.plain_jobs, payload_bytes=200)
        report = run_topologies(plan, config_module.load({"dsn": single.dsn}, environ={}),
                                f"bench-{uuid.uuid4().hex[:8]}",
                                Path(workdir or tempfile.mkdtemp(prefix="pq-topologies-")),
                                Progress(plan.total_jobs, "topologies"), log or print)
    return ({row["topology"]: round(row["jobs_per_s"]) for row in report["rows"]},
            {row["topology"]: round(row["ratio"], 2) for row in report["rows"]})


def main(argv=None):
    from galera_cluster import GaleraCluster
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="ledger jobs (as many plain)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kill-node", type=int)
    parser.add_argument("--workdir")
    parser.add_argument("--topologies", action="store_true",
                        help="measure jobs/s on a single server and the cluster's topologies")
    args = parser.parse_args(argv)
    settings = MultiWriterSettings(jobs=args.jobs, plain_jobs=args.jobs, workers=args.workers,
                                   kill_node=args.kill_node)

    def log(text):
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    with GaleraCluster() as cluster:
        log(f"cluster up in {cluster.timings['start']:.1f} s")
        if args.topologies:
            rates, ratios = measure_topologies(cluster, settings, args.workdir, log)
            for name, rate in rates.items():
                print(f"{name}: {rate} jobs/s, {ratios[name]}x the single server")
            return 0
        report = run_multi_writer(cluster, settings, args.workdir, log)
    print(report.text())
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
