"""The topologies of `prefork-queue bench --cluster-dsn DSN --cluster-dsn DSN ...`:
the throughput of a database cluster (Galera, Group Replication multi-primary),
one DSN per node, against the plain server the bench is configured for, in the
same run. As many supervisors as the cluster has nodes, each of the largest
--workers count, work --jobs no-op jobs in each topology:

- single server: every supervisor on the configured (plain) server;
- one writer node: every supervisor on the first node (what MaxScale's
  readwritesplit or HAProxy with one active backend gives);
- writers on every node: supervisor i on node i (a round-robin load balancer).

The jobs are enqueued in one transaction through the first DSN of the topology,
and jobs/s counted from its commit to the last completion (measure.py). A
cluster figure's ratio is of the single server's.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

from ..config import Config
from ..progress import Progress
from .database import BenchDatabase
from .measure import ProcessWatch, measure_throughput, noop_batch
from .processes import SupervisorProcess, bench_supervisor, supervisor_env

SINGLE, ONE_WRITER, EVERY_NODE = "single server", "one writer node", "writers on every node"
# The targets: the ratio of the single server's jobs/s.
TARGETS = {ONE_WRITER: 0.8, EVERY_NODE: 0.5}


@dataclass(frozen=True)
class TopologyPlan:
    cluster_dsns: Sequence[str]   # one per node
    workers: int                  # per supervisor
    jobs: int
    payload_bytes: int

    @property
    def total_jobs(self) -> int:
        return self.jobs * 3


class SupervisorGroup:
    """Several supervisors watched as one (measure.ProcessWatch's processes)."""

    def __init__(self, supervisors: Sequence[SupervisorProcess]) -> None:
        self.supervisors = supervisors

    def check_alive(self) -> None:
        for supervisor in self.supervisors:
            supervisor.check_alive()

    def memory(self) -> Dict[str, Any]:
        return {}   # not reported for the topologies

    def cpu_seconds(self) -> Dict[str, float]:
        total: Dict[str, float] = {}
        for supervisor in self.supervisors:
            for name, seconds in supervisor.cpu_seconds().items():
                total[name] = total.get(name, 0.0) + seconds
        return total


def topology_dsns(single_dsn: str, cluster_dsns: Sequence[str]) -> Dict[str, List[str]]:
    """{topology: the DSN of each supervisor}, one supervisor per cluster node."""
    nodes = len(cluster_dsns)
    return {SINGLE: [single_dsn] * nodes, ONE_WRITER: [cluster_dsns[0]] * nodes,
            EVERY_NODE: list(cluster_dsns)}


def run_topologies(plan: TopologyPlan, config: Config, queue: str, tmp: Path,
                   progress: Progress, phase: Callable[[str], None]) -> Dict[str, Any]:
    """{"workers", "supervisors", "jobs", "rows": [{"topology", "jobs_per_s", "ratio",
    "target"}]}, the single server first."""
    rates = {}
    for name, dsns in topology_dsns(config.dsn, plan.cluster_dsns).items():
        phase(f"{name}: {len(dsns)} x {plan.workers} workers, {plan.jobs:,} jobs")
        rates[name] = _jobs_per_s(plan, config, dsns, queue, tmp / name.replace(" ", "-"),
                                  progress)
    return {"workers": plan.workers, "supervisors": len(plan.cluster_dsns), "jobs": plan.jobs,
            "rows": [{"topology": name, "jobs_per_s": rate, "ratio": rate / rates[SINGLE],
                      "target": TARGETS.get(name)} for name, rate in rates.items()]}


def _jobs_per_s(plan: TopologyPlan, config: Config, dsns: Sequence[str], queue: str,
                logs: Path, progress: Progress) -> float:
    db = BenchDatabase(config.replace(dsn=dsns[0]))   # enqueues, and counts what is left
    supervisors = [bench_supervisor(plan.workers, queue,
                                    supervisor_env(config.replace(dsn=dsn), {}),
                                    Path(f"{logs}-{index}.log"))
                   for index, dsn in enumerate(dsns)]
    try:
        for supervisor in supervisors:
            supervisor.start()
        for supervisor in supervisors:
            supervisor.wait_idle(plan.workers)
        batch = noop_batch(plan.jobs, plan.payload_bytes, queue, config.max_payload_bytes)
        throughput = measure_throughput(db, queue, batch, ProcessWatch(
            SupervisorGroup(supervisors)), progress)
    finally:
        for supervisor in supervisors:
            supervisor.stop()
        try:
            db.delete_queue(queue)
        finally:
            db.close()
    return throughput.jobs_per_s
