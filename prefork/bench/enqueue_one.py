"""The `enqueue_one` scale scenario of the bench (MySQL): prefork.Client.enqueue in a
loop from a warm producer against the fastest installed peer's one-job enqueue
(peers.py), on the same server, in the same run, while no supervisor runs.

Each contender is a process of its own (enqueue_loop.py), set up one after the
other and then kept waiting. The loops run in ROUNDS rounds, the contenders one
at a time in turn within each round, so that a load on the host that comes and
goes weighs on every contender alike. A contender's figures are over all its
rounds: jobs/s (calls / seconds of its loops), client CPU per call (its process's
CPU time in the loops / calls) and the statements the server took per job (its
Questions counter over the loops, as the other rows count them). The peers'
tables live in a scratch database of their own (PEERS_DATABASE), created for the
row and dropped after it.
"""
import json
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional

from ..process_signals import preexec_die_with_parent
from . import peers
from .database import BenchDatabase
from .enqueue_loop import OURS, PEERS_DATABASE_ENV, READY
from .processes import BenchError

ROUNDS = 3
ENQUEUE_CALLS = 2000       # calls of a contender's loop in a round, at most (--jobs, if fewer)
SET_UP_TIMEOUT = 120.0     # seconds for a contender to be ready (a Django peer migrates)
SECONDS_PER_CALL = 0.5     # a loop's deadline: generous, on a loaded host


class Contender:
    """One contender's process: set up by start(), a round of its loop by run()."""

    def __init__(self, name: str, command: List[str], env: Dict[str, str],
                 log_path: Path) -> None:
        self.name, self.command, self.env, self.log_path = name, command, env, log_path
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.rounds: List[Dict[str, Any]] = []

    def start(self) -> None:
        """The process started and set up (BenchError when it cannot be)."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                env=self.env, bufsize=0, preexec_fn=preexec_die_with_parent())
        if self._line(SET_UP_TIMEOUT, lambda text: text == READY) is None:
            raise BenchError(f"{self.name} did not set up: {self.last_words()}")

    def run(self, db: BenchDatabase, calls: int) -> None:
        """One round of its loop, its figures added to `rounds`."""
        assert self.proc is not None and self.proc.stdin is not None
        before = db.counters()
        self.proc.stdin.write(b"go\n")
        answer = self._line(SET_UP_TIMEOUT + calls * SECONDS_PER_CALL,
                            lambda text: text.startswith("{"))
        after = db.counters()
        if answer is None:
            raise BenchError(f"{self.name} did not finish its loop: {self.last_words()}")
        loop = json.loads(answer)
        loop["statements"] = None if before is None or after is None else \
            after["Questions"] - before["Questions"]
        self.rounds.append(loop)

    def figures(self) -> Dict[str, Any]:
        """{name, jobs_per_s, client_cpu_us_per_call, stmts_per_job} over its rounds."""
        calls = sum(loop["calls"] for loop in self.rounds)
        statements = [loop["statements"] for loop in self.rounds]
        return {"name": self.name,
                "jobs_per_s": calls / sum(loop["seconds"] for loop in self.rounds),
                "client_cpu_us_per_call":
                    1e6 * sum(loop["cpu_seconds"] for loop in self.rounds) / calls,
                "stmts_per_job": None if None in statements else sum(statements) / calls,
                "rounds": [loop["calls"] / loop["seconds"] for loop in self.rounds]}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def last_words(self) -> str:
        """The last line the contenders wrote to their log, for a failure's message."""
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def _line(self, timeout: float, wanted: Callable[[str], bool]) -> Optional[str]:
        """The next line of its stdout that is `wanted`, stripped (a library's own
        output before it is passed over); None at its end or after `timeout` seconds."""
        assert self.proc is not None and self.proc.stdout is not None
        return _wanted_line(self.proc.stdout, time.monotonic() + timeout, wanted)


def _wanted_line(stream: IO[bytes], deadline: float,
                 wanted: Callable[[str], bool]) -> Optional[str]:
    """The stream is unbuffered: select() sees every byte not read yet."""
    while select.select([stream], [], [], max(0.0, deadline - time.monotonic()))[0]:
        line = stream.readline()
        if not line:
            return None
        text = line.decode("utf-8", "replace").strip()
        if wanted(text):
            return text
    return None


class EnqueueOne:
    def __init__(self, db: BenchDatabase, env: Dict[str, str], queue: str, calls: int,
                 payload_bytes: int, log_path: Path,
                 phase: Callable[[str], None]) -> None:
        self.db, self.queue, self.calls, self.log_path = db, queue, calls, log_path
        self.env = {**env, PEERS_DATABASE_ENV: db.peers_database_name}
        self.payload_bytes, self.phase = payload_bytes, phase

    def run(self) -> Dict[str, Any]:
        """The row: ours, the fastest peer as its reference, and every peer's figures."""
        installed = peers.installed()
        if installed:
            self.db.peers_database(True)
        contenders: List[Contender] = []
        try:
            failed = self.start(contenders, [OURS, *installed])
            for number in range(1, ROUNDS + 1):
                for contender in contenders:
                    self.phase(f"scale: enqueue one, {contender.name}, round {number} of "
                               f"{ROUNDS}, {self.calls:,} calls")
                    contender.run(self.db, self.calls)
        finally:
            for contender in contenders:
                contender.stop()
            if installed:
                self.db.peers_database(False)
            self.db.delete_queue(self.queue)
        ours, *timed = [contender.figures() for contender in contenders]
        return self.row(ours, timed, failed, installed)

    def start(self, contenders: List[Contender], names: List[str]) -> List[Dict[str, str]]:
        """Start each contender in turn (a Django peer migrates: never two at once), added
        to `contenders`; the peers that could not set up, each with its reason."""
        failed = []
        for name in names:
            self.phase(f"scale: enqueue one, setting up {name}")
            contender = Contender(name, [sys.executable, "-m", "prefork.bench.enqueue_loop",
                                         name, str(self.calls), str(self.payload_bytes),
                                         self.queue], self.env, self.log_path)
            try:
                contender.start()
            except BenchError as exc:
                contender.stop()
                if name == OURS:
                    raise
                failed.append({"name": name, "error": str(exc)})
                continue
            contenders.append(contender)
        return failed

    def row(self, ours: Dict[str, Any], timed: List[Dict[str, Any]],
            failed: List[Dict[str, str]], installed: List[str]) -> Dict[str, Any]:
        fastest = max(timed, key=lambda peer: peer["jobs_per_s"], default=None)
        ratio = None if fastest is None else ours["jobs_per_s"] / fastest["jobs_per_s"]
        return {"scenario": "enqueue_one", "workers": 0, "jobs": self.calls,
                "rounds": ROUNDS, "jobs_per_s": ours["jobs_per_s"],
                "stmts_per_job": ours["stmts_per_job"],
                "client_cpu_us_per_call": ours["client_cpu_us_per_call"],
                "ours_rounds": ours["rounds"],
                "reference": fastest and fastest["name"],
                "reference_jobs_per_s": fastest and fastest["jobs_per_s"],
                "reference_client_cpu_us_per_call":
                    fastest and fastest["client_cpu_us_per_call"],
                "ratio": ratio,
                "peers": sorted(timed + failed, key=lambda peer: installed.index(peer["name"])),
                "peers_not_installed": [name for name in peers.PEERS if name not in installed]}


def enqueue_calls(jobs: int) -> int:
    """The calls of a contender's loop in a round, for a bench of `jobs` jobs per run."""
    return max(1, min(jobs, ENQUEUE_CALLS))
