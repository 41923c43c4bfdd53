"""`prefork-queue dashboard`: the web dashboard on --dashboard-bind (loopback by
default), from the configured database; no supervisor needed."""
import argparse

from ..config import Config
from .parser import command


@command("dashboard", "Serve the web dashboard (queues, jobs, dead jobs, schedules, "
         "supervisors) on --dashboard-bind, 127.0.0.1:8187 by default. Read-only unless "
         "a dashboard password is set (PREFORK_QUEUE_DASHBOARD_PASSWORD or "
         "--dashboard-password-file); its HTTP enqueue endpoint is off unless a token is "
         "(PREFORK_QUEUE_DASHBOARD_ENQUEUE_TOKEN or --dashboard-enqueue-token-file).")
def dashboard_command(args: argparse.Namespace, config: Config) -> None:
    # Imported here: jinja2 and cheroot load only for this command.
    from ..dashboard import create_app, server
    from ..dashboard.app import url_prefix
    from ..dashboard.hosts import parse_bind
    host, port = parse_bind(config.dashboard_bind)
    server.warn_if_exposed(host)
    app = create_app(config)
    server.serve(app, host, port, url_prefix(config.dashboard_url_prefix or ""),
                 app.gate.read_only, app.enqueue_token is not None)
