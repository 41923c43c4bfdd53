"""The scale scenarios' section of the bench's report (--scale): a line per scenario,
what it measured against what, and the target issue 17 sets for it; for the
scenarios of the claim designs (many_workers, effects), a line and a table of
their rows, each with the target of issue 31 it checks and whether it was met."""
import textwrap
from itertools import groupby
from typing import Any, Dict, List, Optional, Tuple

from .scale import LONG_SECONDS, QUEUES, SLOW_SECONDS, SUPERVISORS, WORKERS_EACH
from .scale_parts import BASE_WORKERS
from .text_table import Column, number, pair, table_lines

# The figures every scenario's row has (None where a scenario has no such figure;
# claimer: the design of the row's supervisor, None where it was not chosen).
SCALE_KEYS = ("scenario", "workers", "claimer", "jobs", "jobs_per_s", "reference_jobs_per_s",
              "ratio", "stmts_per_job", "target", "target_met")

# scenario: (what was measured, what the reference is, the target)
SCENARIOS = {
    "many_queues": (f"{BASE_WORKERS} workers listing {QUEUES} queues, the jobs in the last",
                    "the jobs in the first", ">= 0.9x"),
    "many_workers": ("no-op jobs, a supervisor of each claim design (claimer) at each worker "
                     "count, then the ceiling (the bare batched SQL loop in as many processes, "
                     "no supervisor)", f"the same design's {BASE_WORKERS} workers (of "
                     f"{BASE_WORKERS}) and the ceiling at the same count (of ceiling)",
                     f">= 1.0x the ceiling at {BASE_WORKERS} workers, >= 0.8x of "
                     f"{BASE_WORKERS} at 32, >= 0.7x of {BASE_WORKERS} at 64"),
    "many_supervisors": (f"{SUPERVISORS} supervisors x {WORKERS_EACH} workers",
                         f"1 x {SUPERVISORS * WORKERS_EACH}", ">= 0.9x"),
    "slow_jobs": (f"jobs of {SLOW_SECONDS * 1000:g} ms, {BASE_WORKERS} workers",
                  "the ideal, workers / duration", ">= 0.95x"),
    "slow_jobs_1s": (f"jobs of {LONG_SECONDS:g} s, {BASE_WORKERS} workers",
                     "the ideal, workers / duration", ">= 0.95x"),
    "fork_per_job": (f"--max-items 1, {BASE_WORKERS} workers", None,
                     ">= 240 jobs/s (5x the issue's 48)"),
    "delayed": ("{delayed:,} delayed jobs (due in an hour) in the worked queue",
                "none", ">= 0.9x, idle load unchanged"),
    "effects": ("jobs writing one row each in job.transaction(), a supervisor of each claim "
                "design (claimer) at each worker count",
                "the durable single-row commit rate of as many connections", ">= 0.7x"),
    "bulk_enqueue": ("Store.enqueue_many", "a bare multi-row INSERT of the same rows",
                     ">= 20,000 jobs/s and >= 0.5x"),
    "enqueue_one": ("Client.enqueue in a loop", "the fastest peer's one-job enqueue",
                    ">= 1.5x"),
}
FOOTER_WIDTH = 100


# The tables of the claim designs' scenarios: (header, cell text of a row).
_DESIGN_HEAD: Tuple[Column, ...] = (
    ("workers", number("workers", "{:d}")), ("claimer", lambda row: row["claimer"]),
    ("jobs/s", number("jobs_per_s", "{:,.0f}")))
_DESIGN_TAIL: Tuple[Column, ...] = (
    ("stmts/job", number("stmts_per_job", "{:.2f}")),
    ("CPU ms/job client/server", pair("client_cpu_ms_per_job", "server_cpu_ms_per_job",
                                      "{:.2f}")),
    ("target", lambda row: f"{row['target']}: " + ("met" if row["target_met"] else "missed")))
DESIGN_COLUMNS: Dict[str, Tuple[Column, ...]] = {
    "many_workers": _DESIGN_HEAD + (
        (f"of {BASE_WORKERS}", number("ratio", "{:.2f}x")),
        ("ceiling jobs/s", number("ceiling_jobs_per_s", "{:,.0f}")),
        (f"ceiling of {BASE_WORKERS}", number("ceiling_of_base", "{:.2f}x")),
        ("of ceiling", number("ceiling_ratio", "{:.2f}x"))) + _DESIGN_TAIL,
    "effects": _DESIGN_HEAD + (
        ("commits/s", number("reference_jobs_per_s", "{:,.0f}")),
        ("of commits", number("ratio", "{:.2f}x"))) + _DESIGN_TAIL}


def with_targets(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows, each with its scenario's target (text) for --json, unless it names
    its own (the claim designs' rows), and a claimer and target_met (None) if it has none."""
    return [{"claimer": None, "target": SCENARIOS[row["scenario"]][2], "target_met": None,
             **row} for row in rows]


def scale_lines(rows: Optional[List[Dict[str, Any]]]) -> List[str]:
    """The section (after the table), wrapped; none without --scale."""
    if rows is None:
        return []
    lines = ["scale (--scale), each against its reference in the same run:"]
    for scenario, group in groupby(rows, key=lambda row: row["scenario"]):
        if scenario in DESIGN_COLUMNS:
            lines += _designs_lines(scenario, list(group))
        else:
            lines += [_wrapped(_line(row)) for row in group]
    return lines + [""]


def _wrapped(line: str) -> str:
    return textwrap.fill(line, FOOTER_WIDTH, initial_indent="- ", subsequent_indent="  ")


def _designs_lines(scenario: str, rows: List[Dict[str, Any]]) -> List[str]:
    """What was measured against what, then a table of the rows."""
    measured, reference, _ = SCENARIOS[scenario]
    lead = (f"{scenario.replace('_', ' ')}: {measured}, {rows[0]['jobs']:,} jobs a run, "
            f"against {reference}:")
    return [_wrapped(lead)] + table_lines(DESIGN_COLUMNS[scenario], rows, indent="    ")


def _line(row: Dict[str, Any]) -> str:
    if row["scenario"] == "enqueue_one":
        return _enqueue_one_line(row)
    measured, reference, target = SCENARIOS[row["scenario"]]
    text = (f"{row['scenario'].replace('_', ' ')}: {measured.format(**row)}, "
            f"{row['jobs']:,} jobs: {row['jobs_per_s']:,.0f} jobs/s")
    if reference is not None:
        text += (f" = {row['ratio']:.2f}x {reference} ({row['reference_jobs_per_s']:,.0f} "
                 f"jobs/s)")
    if row.get("stmts_per_job") is not None:
        text += f"; {row['stmts_per_job']:.2f} stmts/job"
    if "idle_stmts_per_s" in row:
        text += "; idle: " + _idle(row, "") + " against " + _idle(row, "reference_")
    return text + f". Target {target}."


def _idle(row: Dict[str, Any], prefix: str) -> str:
    """"4.0 stmts/s, 12 index rows read/s, 3.1 server CPU ms/s"."""
    parts: List[str] = []
    for name, unit, fmt in (("stmts_per_s", "stmts/s", "{:,.1f}"),
                            ("rows_read_per_s", "index rows read/s", "{:,.0f}"),
                            ("server_cpu_ms_per_s", "server CPU ms/s", "{:,.1f}")):
        value = row.get(f"{prefix}idle_{name}")
        parts.append("-" if value is None else f"{fmt.format(value)} {unit}")
    return ", ".join(parts)


def _enqueue_one_line(row: Dict[str, Any]) -> str:
    """Ours, then each peer (the fastest is the reference) or why it has no figures."""
    measured, reference, target = SCENARIOS["enqueue_one"]
    text = f"enqueue one: {measured}, {row['jobs']:,} jobs: {_contender(row)}"
    if row["reference"] is not None:
        text += f" = {row['ratio']:.2f}x {reference} ({row['reference']})"
    parts = [f"{peer['name']} {_contender(peer)}" if "error" not in peer
             else f"{peer['name']} failed ({peer['error']})" for peer in row["peers"]]
    if row["peers_not_installed"]:
        parts.append("not installed: " + ", ".join(row["peers_not_installed"]))
    return text + "; " + "; ".join(parts) + f". Target {target}."


def _contender(figures: Dict[str, Any]) -> str:
    """"2,100 jobs/s, 95 us client CPU/call, 1.00 stmts/job"."""
    text = (f"{figures['jobs_per_s']:,.0f} jobs/s, {figures['client_cpu_us_per_call']:,.0f} us "
            "client CPU/call")
    if figures.get("stmts_per_job") is not None:
        text += f", {figures['stmts_per_job']:.2f} stmts/job"
    return text
