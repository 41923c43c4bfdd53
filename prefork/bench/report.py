"""The bench's output: one row per worker count, as a table or as JSON."""
import json
import textwrap

from .measure import percentile
from .scale_report import scale_lines
from .text_table import number, pair, table_lines
from .workflow_report import workflow_lines

# The figures of a row, for --json and for the test that checks them all.
ROW_KEYS = ("workers", "enqueue_per_s", "ours_jobs_per_s", "baseline_jobs_per_s", "ratio",
            "ceiling_jobs_per_s", "ceiling_ratio",
            "pickup_p50_ms", "pickup_p99_ms", "polled_pickup_p50_ms", "polled_pickup_p99_ms",
            "stmts_per_job", "commits_per_job",
            "idle_stmts_per_s", "cpu_ms_per_job", "baseline_cpu_ms_per_job",
            "server_cpu_ms_per_job", "baseline_server_cpu_ms_per_job",
            "parent_rss_mib", "child_rss_mib", "child_uss_mib")

# (header, cell text of a row) of each column of the table, in order.
COLUMNS = (
    ("workers", number("workers", "{:d}")),
    ("enqueue/s", number("enqueue_per_s", "{:,.0f}")),
    ("ours jobs/s", number("ours_jobs_per_s", "{:,.0f}")),
    ("baseline jobs/s", number("baseline_jobs_per_s", "{:,.0f}")),
    ("ratio", number("ratio", "{:.2f}x")),
    ("ceiling jobs/s", number("ceiling_jobs_per_s", "{:,.0f}")),
    ("of ceiling", number("ceiling_ratio", "{:.2f}x")),
    ("pickup p50 ms", number("pickup_p50_ms", "{:.1f}")),
    ("p99 ms", number("pickup_p99_ms", "{:.1f}")),
    ("polled p50/p99 ms", pair("polled_pickup_p50_ms", "polled_pickup_p99_ms")),
    ("stmts/job", number("stmts_per_job", "{:.2f}")),
    ("commits/job", number("commits_per_job", "{:.2f}")),
    ("idle stmts/s", number("idle_stmts_per_s", "{:.1f}")),
    ("client CPU ms/job ours/base", pair("cpu_ms_per_job", "baseline_cpu_ms_per_job", "{:.2f}")),
    ("server CPU ms/job ours/base", pair("server_cpu_ms_per_job",
                                          "baseline_server_cpu_ms_per_job", "{:.2f}")),
    ("parent RSS MiB", number("parent_rss_mib", "{:.1f}")),
    ("child RSS/USS MiB", pair("child_rss_mib", "child_uss_mib")),
)
MYSQL_ONLY = ("baseline_jobs_per_s", "ratio", "ceiling_jobs_per_s", "ceiling_ratio",
              "stmts_per_job", "commits_per_job",
              "idle_stmts_per_s", "baseline_cpu_ms_per_job", "server_cpu_ms_per_job",
              "baseline_server_cpu_ms_per_job")

NOTES = (
    "ours: the real supervisor (prefork-queue run) with N children; jobs/s from the enqueue "
    "commit until no job is left unfinished.",
    "pickup: enqueue to handler start with idle workers, one job at a time, enqueued through "
    "the store, which rings this host's supervisors (a doorbell); polled: enqueued as an "
    "application does (prefork.enqueue on its own connection) or another host would, so "
    "only the supervisor's poll finds it, at random times over a poll interval.",
    "client CPU ms/job: user + system time of the processes working the queue (ours: the "
    "parent and its children; base: the baseline's processes) during the throughput run; "
    "server CPU ms/job: the database server's, when it runs on this host (all of its work).",
    "child RSS/USS: the largest child; USS is what a child does not share with the parent "
    "(copy-on-write pages it has not touched count only in RSS).",
)
MYSQL_NOTES = (
    "baseline: the textbook loop (one job per claim transaction, a second transaction to "
    "complete, 250 ms idle polls) in N processes, same jobs, same measurement.",
    "stmts/job (Questions) and commits/job (Com_commit: explicit COMMITs; an autocommit "
    "write commits too but is not counted) are server-wide deltas during ours' throughput "
    "run, the bench's own statements taken out; idle stmts/s likewise, with the queue empty.",
    "ceiling: the bare batched SQL loop in N processes, no supervisor: each transaction "
    "completes the batch it ran and claims the next claim_batch jobs (plain statements, "
    "from the batch's commit on, 10 ms polls when idle); of ceiling: ours / ceiling jobs/s.",
)

BUSY_SERVER = 1.0           # stmts/s of other clients worth a warning
FOOTER_WIDTH = 100


def make_row(workers, ours, baseline, ceiling):
    """One row: `ours` is an OursRun, `baseline` and `ceiling` Throughputs or None
    (SQLite)."""
    row = {"workers": workers}
    row.update(_speed(ours.throughput, baseline))
    row.update(_ceiling(ours.throughput, ceiling))
    row.update(_pickups(ours))
    row.update(_database_load(ours, baseline))
    row.update(_resources(ours, baseline))
    return row


def _speed(ours, baseline):
    return {"enqueue_per_s": ours.enqueue_per_s,
            "ours_jobs_per_s": ours.jobs_per_s,
            "baseline_jobs_per_s": baseline.jobs_per_s if baseline else None,
            "ratio": ours.jobs_per_s / baseline.jobs_per_s if baseline else None,
            "baseline_enqueue_per_s": baseline.enqueue_per_s if baseline else None}


def _ceiling(ours, ceiling):
    if ceiling is None:
        return {"ceiling_jobs_per_s": None, "ceiling_ratio": None,
                "ceiling_stmts_per_job": None, "ceiling_cpu_ms_per_job": None,
                "ceiling_server_cpu_ms_per_job": None}
    return {"ceiling_jobs_per_s": ceiling.jobs_per_s,
            "ceiling_ratio": ours.jobs_per_s / ceiling.jobs_per_s,
            "ceiling_stmts_per_job": ceiling.per_job("Questions"),
            "ceiling_cpu_ms_per_job": ceiling.cpu_ms_per_job.get("children"),
            "ceiling_server_cpu_ms_per_job": ceiling.cpu_ms_per_job.get("server")}


def _pickups(ours):
    return {"pickup_p50_ms": _percentile_or_none(ours.pickups, 50),
            "pickup_p99_ms": _percentile_or_none(ours.pickups, 99),
            "polled_pickup_p50_ms": _percentile_or_none(ours.polled_pickups, 50),
            "polled_pickup_p99_ms": _percentile_or_none(ours.polled_pickups, 99)}


def _percentile_or_none(values, pct):
    return percentile(values, pct) if values else None


def _database_load(ours, baseline):
    """Server counters per job (ours, and the baseline's for comparison), idle load."""
    throughput = ours.throughput
    return {"stmts_per_job": throughput.per_job("Questions"),
            "commits_per_job": throughput.per_job("Com_commit"),
            "idle_stmts_per_s": ours.idle_stmts_per_s,
            "background_stmts_per_s": ours.background_stmts_per_s,
            "handler_commits_per_job": throughput.per_job("Handler_commit"),
            "redo_log_writes_per_job": throughput.per_job("Innodb_log_writes"),
            "baseline_stmts_per_job": baseline.per_job("Questions") if baseline else None,
            "baseline_commits_per_job": baseline.per_job("Com_commit") if baseline else None}


def _resources(ours, baseline):
    """CPU per job (client processes, and the server when local) and memory."""
    cpu = ours.throughput.cpu_ms_per_job
    baseline_cpu = baseline.cpu_ms_per_job if baseline else {}
    return {"cpu_ms_per_job": cpu["parent"] + cpu["children"],
            "parent_cpu_ms_per_job": cpu["parent"],
            "baseline_cpu_ms_per_job": baseline_cpu.get("children"),
            "server_cpu_ms_per_job": cpu.get("server"),
            "baseline_server_cpu_ms_per_job": baseline_cpu.get("server"),
            "parent_rss_mib": ours.memory.get("parent_rss"),
            "child_rss_mib": ours.memory.get("child_rss"),
            "child_uss_mib": ours.memory.get("child_uss")}


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=False)


def render_table(report):
    return "\n".join(table_lines(COLUMNS, report["rows"]) + [""]
                     + _limit_lines(report.get("limits")) + scale_lines(report.get("scale"))
                     + workflow_lines(report.get("workflows")) + _footer(report))


def _limit_lines(limits):
    """The limit scenarios' section (--limits), before the footer; none without them."""
    if limits is None:
        return []
    keyed, rate = limits["concurrency"], limits["rate"]
    lines = [
        f"concurrency {keyed['limit']} per key over {keyed['keys']} keys, {keyed['jobs']:,} "
        f"jobs: {keyed['jobs_per_s']:,.0f} jobs/s = {keyed['ratio']:.2f}x the same jobs "
        f"without the limit ({keyed['unlimited_jobs_per_s']:,.0f} jobs/s); at most "
        f"{keyed['most_reserved_per_key']} reserved per key at the bench's polls "
        f"({keyed['unlimited_most_reserved_per_key']} without the limit)"
        + _statements(keyed["stmts_per_job"], keyed["unlimited_stmts_per_job"]) + ".",
        f"rate {rate['rate']}, a backlog of {rate['jobs']:,} jobs: started at "
        + ("-" if rate["achieved_per_s"] is None else
           f"{rate['achieved_per_s']:,.1f}/s = {rate['achieved_pct']:.1f}% of the rate")
        + f" (starts over {rate['starts_span_s']:.2f} s); {rate['jobs_per_s']:,.0f} jobs/s "
        f"end to end" + _statements(rate["stmts_per_job"]) + "."]
    return ([f"limits, {keyed['workers']} workers:"]
            + [textwrap.fill(line, FOOTER_WIDTH, initial_indent="- ", subsequent_indent="  ")
               for line in lines] + [""])


def _statements(limited, unlimited=None):
    """"; 1.20 stmts/job (0.30 without the limit)", or nothing on SQLite."""
    if limited is None:
        return ""
    return f"; {limited:.2f} stmts/job" + ("" if unlimited is None else
                                           f" ({unlimited:.2f} without the limit)")


def _topology_lines(topologies):
    """--cluster-dsn: a line, the cluster's jobs/s as ratios of the single server's."""
    if not topologies:
        return []
    single, *cluster = topologies["rows"]
    return [f"cluster topologies, {topologies['supervisors']} supervisors of "
            f"{topologies['workers']} workers, {topologies['jobs']:,} jobs: "
            f"{single['topology']} {single['jobs_per_s']:,.0f} jobs/s; "
            + "; ".join(f"{row['topology']} {row['jobs_per_s']:,.0f} jobs/s = "
                        f"{row['ratio']:.2f}x (target >= {row['target']}x)" for row in cluster)]


def _footer(report):
    lines = [f"{report['jobs']} no-op jobs of {report['payload_bytes']} payload bytes per run, "
             f"{report['pickups']} pickups; backend {report['backend']}"
             + (f", {report['dialect']} dialect." if report.get("dialect") else ".")]
    cross = report.get("cross_host")
    if cross:
        lines.append(f"cross-host pickup (the supervisor hears no same-host doorbell; wake-ups "
                     f"over UDP on loopback through the registry's address), {cross['workers']} "
                     f"workers, {cross['pickups']} pickups: p50 {cross['pickup_p50_ms']:.1f} ms, "
                     f"p99 {cross['pickup_p99_ms']:.1f} ms"
                     + ("" if cross["idle_stmts_per_s"] is None else
                        f"; idle {cross['idle_stmts_per_s']:.1f} stmts/s")
                     + "; targets p50 < 20 ms, p99 < 100 ms, idle no higher than without")
    lines += _topology_lines(report.get("topologies"))
    backlog = report.get("backlog")
    if backlog:
        lines.append(f"through a backlog of {backlog['rows']:,} ready jobs over "
                     f"{backlog['queues']} queues and {backlog['priorities']} priorities, "
                     f"{backlog['workers']} workers on {backlog['worked_queues']} of the queues: "
                     f"{backlog['jobs_per_s']:,.0f} jobs/s over {backlog['jobs']:,} jobs = "
                     f"{backlog['ratio']:.2f}x of the empty queue "
                     f"({backlog['empty_jobs_per_s']:,.0f} jobs/s), "
                     f"{backlog['disk_reads_per_job']:.2f} pages read from disk per job; "
                     "target >= 0.9x")
    done = report.get("done_rows")
    if done:
        lines.append(f"with {done['rows']:,} done rows in the table: {done['workers']} workers "
                     f"{done['jobs_per_s']:,.0f} jobs/s = {done['ratio']:.2f}x of the empty "
                     f"table ({done['empty_jobs_per_s']:,.0f} jobs/s)"
                     + (f", measured once the server was quiet after the fill "
                        f"({done['settled_seconds']:g} s)" if done.get("settled_seconds")
                        is not None else ""))
    if report["backend"] != "mysql":
        lines.append("baseline, ratio, stmts/job, commits/job, idle stmts/s and the "
                     "baseline's CPU are MySQL-only.")
    background = [row["background_stmts_per_s"] for row in report["rows"]
                  if row.get("background_stmts_per_s") is not None]
    if background and max(background) >= BUSY_SERVER:
        lines.append(f"the server had other clients: up to {max(background):,.0f} stmts/s "
                     "before a run started; the server-wide figures include theirs.")
    lines += list(report["notes"])
    return [textwrap.fill(line, FOOTER_WIDTH, initial_indent="- ", subsequent_indent="  ")
            for line in lines]
