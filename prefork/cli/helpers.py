"""What several commands do with the loaded config: open a checked store, import
the application's handlers (with --django, on the Django project's database and
with its tasks: prefork.contrib.django.runner)."""
import logging
from typing import TYPE_CHECKING

from .. import logs, registry
from ..config import Config
from ..errors import UserError
from ..store import open_store

if TYPE_CHECKING:
    from ..store.contract import Store

EXAMPLE_APP = "prefork.examples"


def checked_store(config: Config) -> "Store":
    """The store, after checking that its schema is current."""
    store = open_store(with_django(config))
    store.check_schema()
    return store


def with_django(config: Config) -> Config:
    """The config, its database and queues taken from Django's when a Django settings
    module is named (Django set up once); as it is otherwise."""
    from ..contrib.django import runner   # imports no Django by itself
    return runner.configured(config) if runner.settings_module(config) else config


def import_handlers(config: Config) -> None:
    """Import the application; refuse to work without handlers, which would send
    every job to dead as an unknown type.

    A first run with nothing configured (no --app, the default SQLite file)
    gets the example handlers, so `prefork-queue --workers 8` shows jobs flow.
    """
    # Imported here, not at the top: the metrics server and croniter come with
    # it, and `run` takes its signals only once this module is loaded.
    from ..contrib.django import runner
    from .. import schedules
    apps = config.app
    django = runner.settings_module(config)
    if django:
        runner.configured(config)   # Django set up, its tasks registered
    elif not apps and config.source("dsn") == "default":
        apps = [EXAMPLE_APP]
        logs.event("example_handlers", level=logging.WARNING, app=EXAMPLE_APP,
                   note="no --app given: running the shipped example handlers")
    registry.import_apps(apps)
    schedules.validate(config)   # [command:*] types, then [schedule:*]
    if config.sentry_dsn or config.sentry_dsn_file:
        from ..contrib import sentry   # only then: the Sentry SDK takes long to import
        sentry.init_from(config)
    if django:
        runner.load_tasks(config)   # last: no Django connection left open for a fork
    if not registry.registered_types():
        raise UserError("no job handlers registered: name your handler module(s) with --app")
