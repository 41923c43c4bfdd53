"""The scale rows of the two claim designs (the `claimer` setting: each worker child
claims for itself, or the supervisor claims for all its idle children), side by
side in one run: at each worker count a supervisor of each design in turn, started
with `--claimer worker` or `--claimer supervisor`, so the host drifts little
between them.

- many workers: `jobs` no-op jobs with each of MANY_WORKERS workers, each design,
  then the ceiling (the bare batched SQL loop in as many processes, no
  supervisor): a row per design and count, against the same design's BASE_WORKERS
  figure and against the ceiling at that count;
- effects: `effects_jobs` jobs writing one row each inside job.transaction() with
  each of EFFECTS_WORKERS workers, each design: a row per design and count,
  against the durable single-row commit rate of as many connections (the bench
  creates the table and drops it afterwards).

Each row names the target of issue 31 it checks (TARGETS) and whether it was met."""
from typing import Any, Dict, List, Tuple

from ..jobs import new_job
from .jobs import EFFECT
from .measure import Throughput, measure_pool
from .processes import BenchError, SupervisorProcess, ceiling_pool
from .scale_parts import BASE_WORKERS, EFFECTS_WORKERS, MANY_WORKERS, ScaleParts, row

# The target a row checks, by (scenario, workers): (the least ratio, the row's figure
# held against it, what that figure is a ratio of).
TARGETS = {("many_workers", BASE_WORKERS): (1.0, "ceiling_ratio", "the ceiling"),
           ("many_workers", 32): (0.8, "ratio", f"{BASE_WORKERS} workers"),
           ("many_workers", 64): (0.7, "ratio", f"{BASE_WORKERS} workers"),
           ("effects", BASE_WORKERS): (0.7, "ratio", "the commit rate"),
           ("effects", 32): (0.7, "ratio", "the commit rate")}


def many_workers(parts: ScaleParts) -> List[Dict[str, Any]]:
    """A row per worker count and design, in that order."""
    runs: Dict[Tuple[str, int], Throughput] = {}
    ceilings: Dict[int, Throughput] = {}
    for workers in MANY_WORKERS:
        for claimer in parts.plan.claimers:
            parts.phase(f"scale: {workers} workers, claimer {claimer}")
            with parts.running([_supervisor(parts, workers, claimer, "workers")]) as watch:
                runs[claimer, workers] = parts.throughput(parts.queue, watch)
        parts.phase(f"scale: the ceiling in {workers} processes")
        ceilings[workers] = measure_pool(parts.db, parts.queue, parts.noop_jobs(parts.plan.jobs),
                                         ceiling_pool(parts.config, parts.queue, workers),
                                         parts.server, parts.progress)
        parts.db.delete_queue(parts.queue)
    rows = []
    for workers in MANY_WORKERS:
        ceiling = ceilings[workers].jobs_per_s
        for claimer in parts.plan.claimers:
            figures = row("many_workers", workers, runs[claimer, workers],
                          runs[claimer, BASE_WORKERS])
            figures.update(claimer=claimer, ceiling_jobs_per_s=ceiling,
                           ceiling_ratio=figures["jobs_per_s"] / ceiling,
                           ceiling_of_base=ceiling / ceilings[BASE_WORKERS].jobs_per_s)
            rows.append(_checked(figures))
    return rows


def effects(parts: ScaleParts) -> List[Dict[str, Any]]:
    """A row per worker count and design, in that order."""
    rows = []
    parts.db.effects_table(True)
    try:
        for workers in EFFECTS_WORKERS:
            runs = {claimer: _effects_run(parts, workers, claimer)
                    for claimer in parts.plan.claimers}
            parts.phase(f"scale: single-row commits on {workers} connections")
            commits = parts.commit_rate(workers)
            for claimer, ours in runs.items():
                figures = row("effects", workers, ours, None)
                figures.update(claimer=claimer, reference_jobs_per_s=commits,
                               ratio=ours.jobs_per_s / commits)
                rows.append(_checked(figures))
    finally:
        parts.db.effects_table(False)
    return rows


def _effects_run(parts: ScaleParts, workers: int, claimer: str) -> Throughput:
    """`effects_jobs` effect jobs, each of which must have written its row."""
    jobs = parts.plan.effects_jobs
    parts.phase(f"scale: {jobs:,} jobs writing a row each, {workers} workers, claimer {claimer}")
    batch = [new_job(EFFECT, {}, queue=parts.queue)] * jobs
    before = parts.db.effects_written()
    with parts.running([_supervisor(parts, workers, claimer, "effects")]) as watch:
        ours = parts.throughput(parts.queue, watch, batch)
    written = parts.db.effects_written() - before
    if written != jobs:
        raise BenchError(f"{jobs} effect jobs ran but wrote {written} rows")
    return ours


def _supervisor(parts: ScaleParts, workers: int, claimer: str,
                name: str) -> Tuple[SupervisorProcess, int]:
    return parts.supervisor(workers, parts.queue, f"{name}-{workers}-{claimer}",
                            ("--claimer", claimer))


def _checked(figures: Dict[str, Any]) -> Dict[str, Any]:
    """The row with the target it checks ("target", text) and whether it was met."""
    least, key, against = TARGETS[figures["scenario"], figures["workers"]]
    return {**figures, "target": f">= {least:.1f}x of {against}",
            "target_met": figures[key] >= least}
