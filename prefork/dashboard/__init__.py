"""The web dashboard: `prefork-queue dashboard`, or create_app(config) under any WSGI
server. web.py the request/response layer (on werkzeug), hosts.py the host names
it answers to, auth.py the password, sessions, CSRF tokens and the enqueue token,
site.py what every handler is given (settings, gate, store, templates), pages.py /
api.py / actions.py / enqueue.py what it answers, app.py the application that
routes to them (the checks every POST passes, the error answers), data.py what the
store's reads become, server.py cheroot; templates/ (Jinja2, autoescaped) and
static/."""
from .app import create_app

__all__ = ["create_app"]
