"""How fast a running dashboard answers: each page and JSON answer requested `calls`
times over one keep-alive HTTP connection, p95 and max in milliseconds, after one
untimed pass. Point it at
a dashboard on a database worth measuring (prefork.bench.dashboard_data fills a
scratch one: 1,000,000 done, 100,000 dead, 10,000 ready jobs).

    python -m prefork.dashboard.speed http://127.0.0.1:8187 [--calls 50]

Read-only: it only GETs. Every answer must be 200, or it stops naming the path."""
import argparse
import http.client
import json
import math
import sys
import time
from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit

from ..errors import UserError


def p95(seconds: Sequence[float]) -> float:
    ordered = sorted(seconds)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


class Reader:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise UserError(f"give the dashboard's http:// URL, got {url!r}")
        self.prefix = parts.path.rstrip("/")
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=30)

    def get(self, path: str) -> bytes:
        self.conn.request("GET", self.prefix + path)
        answer = self.conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise UserError(f"GET {path} answered {answer.status}")
        return body

    def timed(self, path: str, calls: int) -> tuple[float, float]:
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            self.get(path)
            seconds.append(time.perf_counter() - started)
        return p95(seconds) * 1000, max(seconds) * 1000


def paths(reader: Reader) -> list[str]:
    """Every page and JSON answer, with the filters the Jobs pages offer; ids and the
    middle page's cursor taken from the database's own answers."""
    newest = json.loads(reader.get("/api/jobs"))["rows"]
    top = int(newest[0]["id"]) if newest else 1
    dead = json.loads(reader.get("/api/jobs?status=dead"))["rows"]
    some = next((row for row in dead + newest), None)
    if some is None:
        raise UserError("the database has no jobs: nothing worth timing")
    queue, job_type, job_id = str(some["queue"]), str(some["job_type"]), int(some["id"])
    day_ago = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 86400))
    hour_later = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 82800))
    filters = [{}, {"status": "dead"}, {"status": "ready"}, {"queue": queue},
               {"type": job_type}, {"queue": queue, "type": job_type, "status": "dead"},
               {"id": str(top // 3)}, {"key": "order-12345"}, {"key": "order-1"},
               {"from": day_ago, "to": hour_later}, {"after": str(top // 2)},
               {"status": "dead", "after": str(top // 2)}]
    listed = [f"/jobs?{urlencode(query)}" for query in filters]
    listed += [f"/api/jobs?{urlencode(query)}" for query in filters]
    return ["/", "/api/overview", "/api/throughput?range=hour", "/api/throughput?range=day",
            *listed, "/dead", f"/dead?after={top // 2}", f"/jobs/{job_id}",
            f"/api/jobs/{job_id}", "/queues", "/schedules", "/restart",
            "/static/dashboard.js"]


def run(url: str, calls: int) -> None:
    reader = Reader(url)
    every = paths(reader)
    for path in every:   # untimed: a server thread opens its connection on its first request
        reader.get(path)
    print(f"{'GET':58} {'p95 ms':>8} {'max ms':>8}  ({calls} calls each)")
    worst = 0.0
    for path in every:
        high, top = reader.timed(path, calls)
        worst = max(worst, high)
        print(f"{path[:58]:58} {high:8.1f} {top:8.1f}")
    print(f"slowest p95: {worst:.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the dashboard, e.g. http://127.0.0.1:8187")
    parser.add_argument("--calls", type=int, default=50, help="calls per answer (default 50)")
    args = parser.parse_args(argv)
    try:
        run(args.url, args.calls)
    except (UserError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
