"""One contender of the bench's `enqueue_one` row, in a process of its own:

    python -m prefork.bench.enqueue_loop CONTENDER CALLS PAYLOAD_BYTES QUEUE

CONTENDER is `ours` (prefork.Client.enqueue on the configured database, the
settings in PREFORK_QUEUE_* variables as the supervisor gets them) or a peer of
peers.py (in the database PEERS_DATABASE_ENV names, on the same server). It sets
up, enqueues WARM_UP jobs (a warm producer: connected, caches filled) and prints
READY. Then for each line read on stdin (a round) it enqueues CALLS jobs one at a
time and prints {"calls", "seconds", "cpu_seconds"} as JSON: the wall time of the
loop and this process's CPU time in it (user and system).
"""
import json
import os
import sys
import time
from typing import Any

from ..client import Client
from ..config import load
from ..store.mysql.dsn import parse_dsn
from .jobs import NOOP
from .peers import PEERS, Enqueue

OURS = "ours"
READY = "ready"
WARM_UP = 50
PEERS_DATABASE_ENV = "PREFORK_BENCH_PEERS_DATABASE"


def enqueue_of(contender: str, queue: str) -> Enqueue:
    """How `contender` enqueues one job."""
    config = load()
    if contender == OURS:
        client = Client(config=config)
        return lambda payload: client.enqueue(NOOP, payload, queue=queue)
    dsn = parse_dsn(config.dsn)
    host, port = dsn["hosts"][0]
    return PEERS[contender][1]({"host": host, "port": port, "user": dsn["user"],
                                "password": config.password(),
                                "database": os.environ[PEERS_DATABASE_ENV]})


def timed_loop(enqueue: Enqueue, calls: int, payload: dict[str, Any]) -> dict[str, float]:
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(calls):
        enqueue(payload)
    return {"calls": calls, "seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu_started}


def main(argv: list[str]) -> None:
    contender, calls, payload_bytes, queue = argv[0], int(argv[1]), int(argv[2]), argv[3]
    payload = {"pad": "x" * max(0, payload_bytes - len('{"pad":""}'))}
    enqueue = enqueue_of(contender, queue)
    for _ in range(WARM_UP):
        enqueue(payload)
    print(READY, flush=True)
    for _ in sys.stdin:   # a round: a line each, until the bench closes our stdin
        print(json.dumps(timed_loop(enqueue, calls, payload)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
