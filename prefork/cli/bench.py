"""`prefork-queue bench`: the benchmark against a textbook baseline."""
import argparse

from ..config import Config
from ..errors import UserError
from ..bench.scale_names import SCENARIO_NAMES
from ..limits.rules import Rate, parse_rate
from ..store.mysql.dsn import parse_dsn
from .parser import command, whole_number

# The sizes of two --scale scenarios (a small default for --delayed: 100,000 rows
# take a while to insert and delete on a CI server).
DEFAULT_SLOW_JOBS = 1000
DEFAULT_DELAYED = 10_000
# The sizes of --workflows: issue 30's figures.
DEFAULT_GROUP_SIZE = 10_000
DEFAULT_GROUPS = 5
DEFAULT_CHAIN_STEPS = 1_000


def _worker_counts(text: str) -> list[int]:
    """--workers 1,2,4,8: whole numbers from 1, in the order given."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("give worker counts of at least 1, e.g. 1,2,4,8")
    return counts


def _scenarios(text: str) -> tuple[str, ...]:
    """--scale effects,many_queues: some of the scale scenarios, run in their usual order."""
    named = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(named - set(SCENARIO_NAMES))
    if unknown or not named:
        raise argparse.ArgumentTypeError(
            f"no such scale scenario: {', '.join(unknown) or repr(text)}"
            f" (choose from {','.join(SCENARIO_NAMES)})")
    return tuple(name for name in SCENARIO_NAMES if name in named)


def _rate(text: str) -> Rate:
    """--rate 200/s: a rate as a handler declares it."""
    try:
        return parse_rate(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    """--rate-seconds 10: a number of seconds from 1 to 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError("give from 1 to 3600 seconds")
    return value


def _cluster_dsn(text: str) -> str:
    """--cluster-dsn mysql://user@node1:3306/db: one node of a cluster, a MySQL DSN."""
    try:
        parse_dsn(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("benchmark")
    group.add_argument("--workers", dest="bench_workers", type=_worker_counts, default=[1, 2, 4, 8],
                       metavar="N,N,...", help="Worker counts to measure (default 1,2,4,8).")
    group.add_argument("--jobs", type=whole_number, default=20000, metavar="N",
                       help="No-op jobs per throughput run (default 20000).")
    group.add_argument("--payload-bytes", type=whole_number, default=200, metavar="BYTES",
                       help="JSON payload size of each job (default 200).")
    group.add_argument("--pickups", type=whole_number, default=50, metavar="N",
                       help="Jobs enqueued one at a time for pickup latency (default 50).")
    group.add_argument("--done-rows", type=whole_number, default=0, metavar="N",
                       help="Also fill the table with N done rows and rerun the largest "
                            "worker count (MySQL only; e.g. 1000000).")
    group.add_argument("--limits", action="store_true",
                       help="Also run the limit scenarios with the largest worker count: "
                            "--jobs no-op jobs over 100 concurrency keys with 1 running per "
                            "key (and without), and a backlog at --rate.")
    group.add_argument("--rate", dest="bench_rate", type=_rate, default=_rate("200/s"),
                       metavar="RATE", help="The rate scenario's limit (default 200/s).")
    group.add_argument("--rate-seconds", type=_seconds, default=10.0, metavar="S",
                       help="How long the rate scenario's backlog lasts at --rate "
                            "(default 10): RATE x S jobs.")
    group.add_argument("--scale", nargs="?", const=SCENARIO_NAMES, type=_scenarios,
                       metavar="SCENARIO,...",
                       help="Also run the scale scenarios (MySQL only): 20 queues, 8, 32 "
                            "and 64 workers against 8 and against the bare batched SQL loop, "
                            "4 supervisors against 1, slow jobs, fork per job, delayed jobs in "
                            "the worked queue, effects at 8 and 32 workers against the commit "
                            "rate (those two for each claim design, or only the --claimer "
                            "given), bulk enqueue against a "
                            "bare multi-row INSERT, one-job enqueues against the fastest "
                            "installed peer (huey, django-q2, django-tasks-db, Celery); or only "
                            "those named: "
                            + ",".join(SCENARIO_NAMES) + ".")
    group.add_argument("--slow-jobs", type=whole_number, default=DEFAULT_SLOW_JOBS, metavar="N",
                       help="Jobs of the slow-jobs and fork-per-job scenarios of --scale "
                            f"(default {DEFAULT_SLOW_JOBS}).")
    group.add_argument("--delayed", type=whole_number, default=DEFAULT_DELAYED, metavar="N",
                       help="Delayed jobs in the worked queue in the delayed scenario of "
                            f"--scale (default {DEFAULT_DELAYED:,}; the issue's figure: 100000).")
    group.add_argument("--backlog", type=whole_number, default=0, metavar="N",
                       help="Also work through a backlog of N ready jobs over 20 queues and 5 "
                            "priorities with the largest worker count on 5 of the queues "
                            "(MySQL only; e.g. 1000000).")
    group.add_argument("--cross-host", action="store_true",
                       help="Also measure pickup latency with the largest worker count when "
                            "the supervisor hears no same-host doorbell and takes wake-ups over "
                            "UDP on loopback (doorbell = false, wakeup_bind = 127.0.0.1:0), as "
                            "one on another host would.")
    group.add_argument("--cluster-dsn", dest="cluster_dsns", type=_cluster_dsn, action="append",
                       default=[], metavar="DSN",
                       help="A node of a database cluster (Galera, Group Replication), one "
                            "flag per node, at least 2, migrated: also measure jobs/s with "
                            "one supervisor per node of the largest worker count, all "
                            "writing through the first node, then each through its own, as "
                            "ratios of the configured server's (a plain one) in the same run.")
    group.add_argument("--workflows", action="store_true",
                       help="Also run the workflow scenarios with the largest worker count: "
                            "a group of --group-size no-op members and its callback against as "
                            "many plain jobs, --groups times (jobs/s, the callback's start "
                            "delay), and a chain of --chain-steps steps (steps/s, each step's "
                            "start delay).")
    group.add_argument("--group-size", type=whole_number, default=DEFAULT_GROUP_SIZE,
                       metavar="N", help="Members of each group of --workflows (default "
                                         f"{DEFAULT_GROUP_SIZE:,}).")
    group.add_argument("--groups", type=whole_number, default=DEFAULT_GROUPS, metavar="N",
                       help="Groups of --workflows, each after as many plain jobs (default "
                            f"{DEFAULT_GROUPS}).")
    group.add_argument("--chain-steps", type=whole_number, default=DEFAULT_CHAIN_STEPS,
                       metavar="N", help="Steps of the chain of --workflows (default "
                                         f"{DEFAULT_CHAIN_STEPS:,}).")
    group.add_argument("--json", action="store_true", help="Print the report as JSON.")
    group.add_argument("--dashboard", action="store_true",
                       help="Instead: fill the configured (empty, scratch) MySQL database with "
                            "1,110,000 jobs and time the dashboard's reads at p95.")


@command("bench", "Measure throughput, pickup latency, database load and memory of the "
         "supervisor against a textbook baseline, on a scratch queue of the configured "
         "database. An admin tool: it DELETEs its scratch rows afterwards (even after "
         "Ctrl-C), so the account needs DELETE on prefork_jobs.", arguments=_bench_arguments)
def bench_command(args: argparse.Namespace, config: Config) -> int:
    if args.dashboard:
        from ..bench import dashboard_data
        dashboard_data.run(config, calls=50)
        return 0
    from ..bench.driver import Plan, run_bench
    plan = Plan(workers=args.bench_workers, jobs=args.jobs, payload_bytes=args.payload_bytes,
                pickups=args.pickups, done_rows=args.done_rows, as_json=args.json,
                limits=args.limits, rate=args.bench_rate, rate_seconds=args.rate_seconds,
                scale=args.scale or (), slow_jobs=args.slow_jobs, delayed=args.delayed,
                backlog=args.backlog, cross_host=args.cross_host,
                cluster_dsns=tuple(args.cluster_dsns), workflows=args.workflows,
                group_size=args.group_size, groups=args.groups, chain_steps=args.chain_steps)
    return run_bench(plan, config)
