"""A supervisor and its producers on a Galera node that is killed: their DSN names
every node, their own first (mysql://root@own,other1,other2/db), so on the kill
they go on through another node.

The supervisor runs ledger and plain jobs (tests/chaos.py) through its node; a
prefork.Client thread enqueues all along through the same DSN. Once the run is
under way the node is killed (SIGKILL). Measured from the kill:

- eviction: when another node may be written to again (wsrep_ready ON, Synced,
  the cluster down to the survivors). Until the cluster evicts the dead node a
  survivor may answer 1047 (not ready) and its commits wait: hosts.py skips it;
- works again: the supervisor's first job completed after the kill (necessarily
  through another node, the killed one being gone);
- the Client's first enqueue after the kill, and a `prefork-queue enqueue` run
  just after the kill.

The node is then restarted (it rejoins by IST) and the queue drained; chaos.py's
audit: nothing lost or stuck, one effect per ledger job; a job runs again only
when its earlier run was cut by the kill, and never while that run's worker lives.

    python tests/galera_failover.py [--jobs 400] [--hang]   # a cluster of its own
"""
import argparse
import dataclasses
import signal
import sys
import threading
import time
from datetime import datetime

import pymysql
from chaos import (PLAIN_JOB_TYPE, Database, Scenario, audit_ledger, count_reexecutions,
                   enqueue_mixed)
from conftest import run_cli
from galera_soak import MultiWriterSettings
from polling import poll_until

import prefork
from prefork import config as config_module
from prefork.errors import DatabaseUnavailable

CLIENT_PAUSE = 0.05   # seconds between the producer's enqueues


@dataclasses.dataclass
class FailoverSettings(MultiWriterSettings):
    jobs: int = 300
    plain_jobs: int = 300
    workers: int = 4
    chaos_seconds: float = 12.0    # sizes the handlers' work: busy well past the kill
    kill_node: int = 2             # the supervisor's own node
    hang: bool = False             # SIGSTOP the node instead (a hung server), SIGKILL it later
    kill_after: float = 3.0
    drain_timeout: float = 120.0


def multi_host_dsn(cluster, first):
    """The cluster's DSN naming every node, `first` first, the others in order."""
    order = [first, *(index for index in range(cluster.size) if index != first)]
    hosts = ",".join(f"{cluster.nodes[i].host}:{cluster.nodes[i].port}" for i in order)
    return f"mysql://root@{hosts}/{cluster.database}"


class Producer(threading.Thread):
    """prefork.Client enqueueing plain jobs all along; a failed call is tried again
    with the same key (the next call connects to the next host)."""

    def __init__(self, dsn, scenario):
        super().__init__(daemon=True)
        self.config = config_module.load({"dsn": dsn}, environ={})
        self.scenario = scenario
        self.keys, self.errors, self.enqueued_at = [], [], []
        self.stopping = threading.Event()

    def run(self):
        with prefork.Client(config=self.config) as client:
            while not self.stopping.is_set():
                key = f"{self.scenario.run}-c{len(self.keys):05d}"
                try:
                    client.enqueue(PLAIN_JOB_TYPE, {"run": self.scenario.run, "work_ms": 1.0},
                                   queue=self.scenario.queue, key=key, max_attempts=20)
                except (DatabaseUnavailable, pymysql.err.MySQLError) as exc:
                    self.errors.append((time.time(), type(exc).__name__))
                else:
                    self.keys.append(key)
                    self.enqueued_at.append(time.time())
                self.stopping.wait(CLIENT_PAUSE)

    def first_after(self, when):
        return min((at for at in self.enqueued_at if at > when), default=None)


def run_node_failover(cluster, settings, workdir=None, log=None):
    """Returns chaos.Report: figures (seconds from the kill) and checks."""
    victim = settings.kill_node
    survivor = next(index for index in range(cluster.size) if index != victim)
    dsn = multi_host_dsn(cluster, victim)
    db = Database(cluster.dsn(survivor), environ={})
    with Scenario(db, "v", f"galera: node {victim} killed under its supervisor and "
                  "producers (DSN: every node, their own first)", settings, workdir,
                  log) as scenario:
        report = scenario.report
        keys, plain_keys = enqueue_mixed(scenario, settings)
        sup = scenario.supervisor("failover", settings.workers, dsn=dsn)
        scenario.wait_ready(sup, settings.workers)
        producer = Producer(dsn, scenario)
        producer.start()
        try:
            poll_until(lambda: sup.events("job_completed"), 30, message="a job done")
            time.sleep(settings.kill_after)   # the pool busy, the producer enqueueing
            killed_at = _fail(cluster, victim, settings.hang, scenario.log)
            cli_keys = []
            cli = threading.Thread(target=_enqueue_cli, args=(dsn, scenario, report, killed_at,
                                                             cli_keys))
            cli.start()
            evicted_at = _wait_writable(cluster, victim)
            works_at = poll_until(lambda: _completed_after(sup, killed_at), 60, interval=0.05,
                                  message="a job completed after the kill")
            cli.join()
            poll_until(lambda: producer.first_after(killed_at), 30, interval=0.05,
                       message="the producer's first enqueue after the kill")
        finally:
            producer.stopping.set()
            producer.join()
        cluster.kill(victim)   # a hung node too: it was evicted, it must start again
        cluster.restart(victim)
        scenario.log(f"node {victim} Synced again")
        report.figures.update({
            "eviction (s after the kill)": round(evicted_at - killed_at, 1),
            "supervisor works again (s after the kill)": round(works_at - killed_at, 1),
            "works again (s after the eviction)": round(works_at - evicted_at, 1),
            "Client's first enqueue (s after the kill)":
                round(producer.first_after(killed_at) - killed_at, 1),
            "Client calls failed": len(producer.errors)})
        # The target, counted from when another node may be written to: the
        # supervisor retries its connection every second and its workers start at
        # once after a reconnection, so 5 s is a wide margin, not a speed test.
        report.check("the supervisor works again within 5 s of another node being writable",
                     works_at - evicted_at <= 5.0, f"{works_at - evicted_at:.1f} s")
        poll_until(lambda: not db.unfinished(scenario.queue), settings.drain_timeout,
                   interval=0.2, message="the queue to empty")
        alive = sup.alive()
        codes = scenario.stop_all()
        report.check("the supervisor survived and exited 0 on SIGTERM",
                     alive and codes == [0], f"alive {alive}, exits {codes}")
        audit_ledger(report, db, scenario.run, scenario.queue, keys,
                     plain_keys + producer.keys + cli_keys)
        count_reexecutions(report, scenario.executions())
        check_reruns(report, sup, scenario.executions(), killed_at)
        scenario.check_no_leftovers()
    return report


def _fail(cluster, victim, hang, log):
    """SIGKILL the node (its port refuses at once), or SIGSTOP it (a hung server: its
    port takes connections that never get a greeting); the wall time."""
    log(f"kill -{'STOP' if hang else '9'} node {victim}")
    if hang:
        cluster.nodes[victim].proc.send_signal(signal.SIGSTOP)
    else:
        cluster.kill(victim)
    return time.time()


def _wait_writable(cluster, victim):
    """When a survivor was ready and Synced in a cluster without the victim."""
    survivors = [index for index in range(cluster.size) if index != victim]

    def evicted():
        node = cluster.nodes[survivors[0]]
        try:
            size = int(node.status("wsrep_cluster_size")["wsrep_cluster_size"])
        except pymysql.err.MySQLError:   # it timed out waiting for the new view: look again
            return False
        return size == len(survivors) and node.synced()
    poll_until(evicted, 60, interval=0.02, message="the dead node evicted")
    return time.time()


def _completed_after(sup, when):
    times = [_event_time(event) for event in sup.events("job_completed")]
    return min((at for at in times if at > when), default=None)


def _enqueue_cli(dsn, scenario, report, killed_at, keys):
    key = f"{scenario.run}-cli"
    done = run_cli("enqueue", "--queue", scenario.queue, "--key", key, "--max-attempts", "20",
                   PLAIN_JOB_TYPE, f'{{"run": "{scenario.run}", "work_ms": 1}}', dsn=dsn)
    report.check("prefork-queue enqueue just after the kill succeeds", done.returncode == 0,
                 done.stderr[-300:])
    report.figures["prefork-queue enqueue (s after the kill)"] = round(time.time() - killed_at, 1)
    keys += [key] if done.returncode == 0 else []


def check_reruns(report, sup, exec_runs, killed_at):
    """A job run again: its earlier run started before the kill (cut by it), and the
    later run started after that run's worker had exited (never twice at once)."""
    exited = {event["pid"]: _event_time(event) for event in sup.events("worker_exited")}
    by_key = {}
    for when, pid, _, _, key in sorted(exec_runs):
        by_key.setdefault(key, []).append((when, pid))
    uncut, at_once = [], []
    for key, runs in by_key.items():
        for (when, pid), (later, _) in zip(runs, runs[1:]):
            if when > killed_at:
                uncut.append(key)
            if exited.get(pid, float("inf")) > later:
                at_once.append(key)
    report.check("re-runs only of jobs whose run the kill cut", not uncut, f"{uncut[:5]}")
    report.check("no job ran again while its earlier run's worker lived", not at_once,
                 f"{at_once[:5]}")


def _event_time(event):
    return datetime.fromisoformat(event["ts"]).timestamp()


def main(argv=None):
    from galera_cluster import GaleraCluster
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300, help="ledger jobs (as many plain)")
    parser.add_argument("--hang", action="store_true", help="SIGSTOP the node, not SIGKILL")
    args = parser.parse_args(argv)

    def log(text):
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    with GaleraCluster() as cluster:
        report = run_node_failover(cluster, FailoverSettings(
            jobs=args.jobs, plain_jobs=args.jobs, hang=args.hang), log=log)
    print(report.text())
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
