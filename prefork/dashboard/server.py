"""Serving the dashboard with cheroot: CherryPy's HTTP/1.1 WSGI server, pure Python
(no compiler on the host), threaded, with keep-alive and request size and timeout
limits, and no dependency beyond two small helper packages. It needs no process
manager of its own: `prefork-queue dashboard` runs it in the foreground, and
SIGTERM or Ctrl-C stops it after the requests in flight."""
import signal
import sys
import threading
from types import FrameType
from typing import Any

from cheroot import wsgi

from .. import logs
from ..addresses import is_loopback
from ..errors import UserError
from ..events import Event

THREADS = 10
REQUEST_TIMEOUT = 30        # seconds a client may take to send a request
MAX_REQUEST_HEADER = 64 * 1024
MAX_REQUEST_BODY = 1024 * 1024
STOP_CHECK_SECONDS = 0.5   # how often the waiting main thread looks (a signal wakes it sooner)


def serve(app: Any, host: str, port: int, url_prefix: str, read_only: bool,
          enqueue_on: bool = False) -> None:
    """Serve until SIGTERM or SIGINT. Says where on stdout once it listens (the port
    the system chose, for port 0), and whether the HTTP enqueue endpoint is on."""
    server = wsgi.Server((host, port), app, numthreads=THREADS, timeout=REQUEST_TIMEOUT,
                         server_name="prefork-queue-dashboard")
    server.max_request_header_size = MAX_REQUEST_HEADER
    server.max_request_body_size = MAX_REQUEST_BODY
    stop = _stop_on_signals()
    _listen(server, host, port)
    bound_host, bound_port = server.bind_addr[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    mode = "read-only: no dashboard password set" if read_only else "actions need a login"
    if enqueue_on:
        mode += "; POST /api/enqueue takes jobs with its token"
    print(f"dashboard serving on http://{shown}:{bound_port}{url_prefix}/ ({mode})",
          flush=True)
    logs.event(Event.DASHBOARD_STARTED, address=f"{shown}:{bound_port}",
               url_prefix=url_prefix, read_only=read_only, enqueue_endpoint=enqueue_on)
    # cheroot serves in a thread of its own and the main thread only waits: a stop
    # raised as an exception wherever the main thread happened to be (inside a
    # lock of cheroot's, say) could leave the server unable to stop.
    failure: list[BaseException] = []
    serving = threading.Thread(target=_serve, args=(server, stop, failure),
                               name="dashboard-serve")
    serving.start()
    while not stop.wait(STOP_CHECK_SECONDS):
        pass
    server.stop()
    serving.join()
    if failure:
        raise failure[0]


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (from here on, a stop is a clean one)."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    return stop


def _serve(server: wsgi.Server, stop: threading.Event, failure: list[BaseException]) -> None:
    """server.serve() until stopped; what it raised goes to failure, and stops us."""
    try:
        server.serve()
    except BaseException as exc:
        failure.append(exc)
    finally:
        stop.set()


def _listen(server: wsgi.Server, host: str, port: int) -> None:
    try:
        server.prepare()
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def warn_if_exposed(host: str) -> None:
    if not is_loopback(host):
        print(f"prefork-queue: warning: the dashboard listens on {host}, reachable beyond "
              f"this host: serve it behind a reverse proxy with TLS (see the README's "
              f"Dashboard section)", file=sys.stderr, flush=True)

