"""The cross-host scenario of `prefork-queue bench --cross-host`: pickup latency when
the supervisor cannot hear this host's doorbell (`doorbell = false`) and listens for
wake-ups over UDP on loopback (`wakeup_bind = 127.0.0.1:0`, published in the
registry), as a supervisor on another host would: the bench's store rings it through
the address it reads from the registry, or its poll finds the job. Also the idle
load of that supervisor (its wake-up listener must not cost statements).

The largest --workers count, --pickups jobs one at a time, each enqueued a random
gap after the previous one finished, through the store (which rings the addresses).
"""
from pathlib import Path
from typing import Any, Callable, Dict

from ..progress import Progress
from ..settings import SETTINGS
from .database import BenchDatabase
from .measure import PickupPlan, ProcessWatch, measure_idle_rates, measure_pickups, percentile
from .processes import bench_supervisor

# Settings of the supervisor measured, by name: no same-host bell, UDP on loopback.
CROSS_HOST_SETTINGS = {"doorbell": "false", "wakeup_bind": "127.0.0.1:0"}


def cross_host_env(env: Dict[str, str]) -> Dict[str, str]:
    names = {setting.name: setting.env_name for setting in SETTINGS}
    return {**env, **{names[name]: value for name, value in CROSS_HOST_SETTINGS.items()}}


def run_cross_host(workers: int, pickups: PickupPlan, db: BenchDatabase, env: Dict[str, str],
                   tmp: Path, queue: str, server: Any, progress: Progress,
                   phase: Callable[[str], None]) -> Dict[str, Any]:
    """{"workers", "pickups", "pickup_p50_ms", "pickup_p99_ms", idle figures}. The idle
    load is measured first: its seconds also outlast the store's cache of the
    registry's addresses, so the first ring reads this supervisor's."""
    supervisor = bench_supervisor(workers, queue, cross_host_env(env),
                                  tmp / "supervisor-cross-host.log")
    try:
        supervisor.start()
        supervisor.wait_idle(workers)
        watch = ProcessWatch(supervisor, server)
        phase(f"cross-host: {workers} workers, idle load")
        idle = measure_idle_rates(db, watch) or {}
        phase(f"cross-host: {pickups.count} pickups")
        latencies = measure_pickups(db, queue, pickups, watch, progress)
    finally:
        supervisor.stop()
    return {"workers": workers, "pickups": len(latencies),
            "pickup_p50_ms": percentile(latencies, 50),
            "pickup_p99_ms": percentile(latencies, 99),
            "idle_stmts_per_s": idle.get("stmts_per_s"),
            "idle_server_cpu_ms_per_s": idle.get("server_cpu_ms_per_s")}
