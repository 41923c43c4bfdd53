"""`prefork-queue bench`: the benchmark against a textbook baseline."""
import argparse

from ..config import Config
from .parser import command, whole_number


def _worker_counts(text: str) -> list[int]:
    """--workers 1,2,4,8: whole numbers from 1, in the order given."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("give worker counts of at least 1, e.g. 1,2,4,8")
    return counts


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
    group.add_argument("--json", action="store_true", help="Print the report as JSON.")
    group.add_argument("--dashboard", action="store_true",
                       help="Instead: fill the configured (empty, scratch) MySQL database with "
                            "1,110,000 jobs and time the dashboard's reads at p95.")


@command("bench", "Measure throughput, pickup latency, database load and memory of the "
         "supervisor against a textbook baseline, on a scratch queue of the configured "
         "database. An admin tool: it DELETEs its scratch rows afterwards (even after "
         "Ctrl-C), so the account needs DELETE on prefork_jobs.", arguments=_bench_arguments,
         own_flags=("--workers",))   # here --workers is a list of counts
def bench_command(args: argparse.Namespace, config: Config) -> int:
    if args.dashboard:
        from ..bench import dashboard_data
        dashboard_data.run(config, calls=50)
        return 0
    from ..bench import Plan, run_bench
    plan = Plan(workers=args.bench_workers, jobs=args.jobs, payload_bytes=args.payload_bytes,
                pickups=args.pickups, done_rows=args.done_rows, as_json=args.json)
    return run_bench(plan, config)
