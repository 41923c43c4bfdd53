"""What every request handler is given: the settings, the password gate, this
thread's store and the page templates (pages.py, api.py, actions.py and enqueue.py
take a Site; app.py makes one and routes requests to them)."""
import threading
from typing import Any

import jinja2

from ..config import Config
from ..store import driver_errors, open_store
from ..store.contract import Store
from .auth import Gate
from .web import Request, Response


class Site:
    """The dashboard's state a handler may use. Each server thread keeps its own store
    (a connection is not shared between threads); drop_store() forgets it after a
    database error, and the next request reconnects."""

    def __init__(self, config: Config, gate: Gate) -> None:
        self.config = config
        self.gate = gate
        self.redact_keys: list[str] = list(config.dashboard_redact or [])
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("prefork.dashboard", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined)
        self._local = threading.local()

    # -- the store of this thread ----------------------------------------------------------
    def store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self._local.store = open_store(self.config)
        return store

    def has_store(self) -> bool:
        """Whether this thread already holds a store (from an earlier request)."""
        return getattr(self._local, "store", None) is not None

    def drop_store(self) -> None:
        store = getattr(self._local, "store", None)
        self._local.store = None
        if store is not None:
            try:
                store.close()
            except driver_errors():
                pass

    # -- pages -----------------------------------------------------------------------------
    def render(self, request: Request, template: str, status: int = 200,
               **context: Any) -> Response:
        session = request.session
        page = self.templates.get_template(template).render(
            root=request.root, path=request.route_path, read_only=self.gate.read_only,
            can_act=session is not None, csrf=session.csrf if session else "",
            notice=session.take_notice() if session else "", **context)
        return Response(page, status, mimetype="text/html")
