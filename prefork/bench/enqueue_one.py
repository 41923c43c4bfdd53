"""The `enqueue_one` scale scenario of the bench (MySQL): prefork.Client.enqueue in a
loop from a warm producer against the fastest installed peer's one-job enqueue
(peers.py), on the same server, in the same run.

Each contender runs in a process of its own (enqueue_loop.py), one after the
other, while no supervisor runs: ours before the peers and again after them (the
row gives the mean of the two), so that a load on the host that changes during
the run weighs on both sides alike. For each: jobs/s over the loop, the client
CPU per call (its process's CPU time in the loop / calls) and the statements the
server took per job (its Questions counter over the loop, as the other rows
count them). The peers' tables live in a scratch database of their own
(PEERS_DATABASE), created for the row and dropped after it.
"""
import json
import select
import time
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional

from ..process_signals import preexec_die_with_parent
from . import peers
from .database import BenchDatabase
from .enqueue_loop import OURS, PEERS_DATABASE_ENV, READY
from .processes import BenchError

# Calls each contender makes in its timed loop, at most (fewer for a smaller --jobs).
ENQUEUE_CALLS = 5000
SET_UP_TIMEOUT = 120.0     # seconds for a contender to be ready (a Django peer migrates)
SECONDS_PER_CALL = 0.5     # the loop's deadline: generous, on a loaded host


class EnqueueOne:
    def __init__(self, db: BenchDatabase, env: Dict[str, str], queue: str, calls: int,
                 payload_bytes: int, log_path: Path,
                 phase: Callable[[str], None]) -> None:
        self.db, self.queue, self.calls, self.payload_bytes = db, queue, calls, payload_bytes
        self.env = {**env, PEERS_DATABASE_ENV: self.db.peers_database_name}
        self.log_path, self.phase = log_path, phase

    def run(self) -> Dict[str, Any]:
        """The row: ours, the fastest peer as its reference, and every peer's figures."""
        first = self.contender(OURS)
        found = self.peers()
        last = self.contender(OURS)
        self.db.delete_queue(self.queue)
        ours = {key: (first[key] + last[key]) / 2 for key in first if key != "name"}
        timed = [peer for peer in found if "jobs_per_s" in peer]
        fastest = max(timed, key=lambda peer: peer["jobs_per_s"], default=None)
        return {"scenario": "enqueue_one", "workers": 0, "jobs": self.calls,
                "jobs_per_s": ours["jobs_per_s"], "stmts_per_job": ours["stmts_per_job"],
                "client_cpu_us_per_call": ours["client_cpu_us_per_call"],
                "reference": fastest and fastest["name"],
                "reference_jobs_per_s": fastest and fastest["jobs_per_s"],
                "reference_client_cpu_us_per_call":
                    fastest and fastest["client_cpu_us_per_call"],
                "ratio": fastest and ours["jobs_per_s"] / fastest["jobs_per_s"],
                "ours_runs": [first, last], "peers": found,
                "peers_not_installed": [name for name in peers.PEERS
                                        if name not in {peer["name"] for peer in found}]}

    def peers(self) -> List[Dict[str, Any]]:
        """Each installed peer's figures, or why it has none (its last words)."""
        installed = peers.installed()
        if not installed:
            return []
        self.db.peers_database(True)
        try:
            return [self.peer(name) for name in installed]
        finally:
            self.db.peers_database(False)

    def peer(self, name: str) -> Dict[str, Any]:
        try:
            return self.contender(name)
        except BenchError as exc:
            return {"name": name, "error": str(exc)}

    def contender(self, name: str) -> Dict[str, Any]:
        """One contender's timed loop in a process of its own; BenchError when it fails."""
        self.phase(f"scale: enqueue one, {name}, {self.calls:,} calls")
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "prefork.bench.enqueue_loop", name, str(self.calls),
                 str(self.payload_bytes), self.queue],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=self.env, bufsize=0,
                preexec_fn=preexec_die_with_parent())
        try:
            return self.measure(name, proc)
        finally:
            proc.kill()
            proc.wait()

    def measure(self, name: str, proc: "subprocess.Popen[bytes]") -> Dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        if _line(proc.stdout, SET_UP_TIMEOUT, lambda text: text == READY) is None:
            raise BenchError(f"{name} did not set up: {self.last_words()}")
        before = self.db.counters()
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        answer = _line(proc.stdout, SET_UP_TIMEOUT + self.calls * SECONDS_PER_CALL,
                       lambda text: text.startswith("{"))
        after = self.db.counters()
        if not answer:
            raise BenchError(f"{name} did not finish its loop: {self.last_words()}")
        loop = json.loads(answer)
        statements = None if before is None or after is None else \
            (after["Questions"] - before["Questions"]) / loop["calls"]
        return {"name": name, "jobs_per_s": loop["calls"] / loop["seconds"],
                "client_cpu_us_per_call": 1e6 * loop["cpu_seconds"] / loop["calls"],
                "stmts_per_job": statements}

    def last_words(self) -> str:
        """The last line the contenders wrote to their log, for a failure's message."""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"


def _line(stream: IO[bytes], timeout: float, wanted: Callable[[str], bool]) -> Optional[str]:
    """The next line of a contender's stdout that is `wanted`, stripped (a library's
    own output before it is passed over); None at its end or after `timeout` seconds.
    The stream is unbuffered: select() sees every byte not read yet."""
    deadline = time.monotonic() + timeout
    while select.select([stream], [], [], max(0.0, deadline - time.monotonic()))[0]:
        line = stream.readline()
        if not line:
            return None
        text = line.decode("utf-8", "replace").strip()
        if wanted(text):
            return text
    return None


def enqueue_calls(jobs: int) -> int:
    """The calls of each contender's loop for a bench of `jobs` jobs per run."""
    return max(1, min(jobs, ENQUEUE_CALLS))

