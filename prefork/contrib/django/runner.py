"""`prefork-queue --django myproject.settings`: Django set up once in the supervisor,
the tasks of INSTALLED_APPS registered as handlers, every Django connection closed
before the fork, and in each child fresh connections around every job, as Django
gives a request. The queue's database defaults to the tasks backends' one.

The settings module is the `django` setting; when it is empty and no --app is
named, DJANGO_SETTINGS_MODULE from the environment (as manage.py would read it).
"""
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from ... import config as config_module
from ...config import Config
from ...errors import UserError
from ...jobs import Job
from ...logs import event
from ...store import open_store
from . import database

APP = "prefork.contrib.django"
PINNED = ("dsn", "db_password", "queues")   # what configured() may take from Django
_set_up: str | None = None   # the settings module django.setup() ran with


def settings_module(config: Config) -> str | None:
    """The Django settings module this command runs with, or None (no Django)."""
    if config.django:
        return str(config.django)
    if not config.app:
        return os.environ.get("DJANGO_SETTINGS_MODULE") or None
    return None


def configured(config: Config) -> Config:
    """Set Django up (once) and return the config the queue runs with: the DSN, password
    and queues left at their defaults taken from the TASKS backends' database."""
    module = settings_module(config)
    if module is None:
        return config
    _setup(module)
    from django.db import connections  # type: ignore[import-untyped, import-not-found, unused-ignore]
    backends = our_backends()
    if not backends:
        raise UserError(f"Django settings {module!r}: no TASKS backend is "
                        "prefork.contrib.django.TaskBackend")
    aliases = sorted({backend.database for backend in backends})
    if len(aliases) > 1 and config.source("dsn") == "default":
        raise UserError(f"the TASKS backends use databases {', '.join(aliases)}: run a "
                        "supervisor per database, each with its --dsn")
    queues = list(dict.fromkeys(queue for backend in backends for queue in sorted(backend.queues)))
    return database.queue_config(config, aliases[0], connections[aliases[0]].settings_dict,
                                 queues)


def pinned_flags(flags: Mapping[str, str | None], given: Config,
                 derived: Config) -> dict[str, str | None]:
    """The supervisor's flags with what configured() took from Django added: a SIGHUP
    reloads the config from flags, file and environment, and must find the same
    database (the password too; these flags are never a command line)."""
    pinned = dict(flags)
    for name in PINNED:
        value = getattr(derived, name)
        if value != getattr(given, name):
            pinned[name] = ",".join(value) if isinstance(value, list) else str(value)
    return pinned


def load_tasks(config: Config) -> None:
    """In the supervisor, before any fork: the tasks registered (our app's ready()
    imported every app's `tasks` module), each job given fresh Django connections,
    and no Django connection left open to be inherited."""
    from django.apps import apps  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from django.db import connections  # type: ignore[import-untyped, import-not-found, unused-ignore]

    from ...worker import loop
    if not apps.is_installed(APP):
        raise UserError(f"add {APP!r} to INSTALLED_APPS: it registers the tasks and its "
                        "migration creates the queue's tables")
    loop.set_around_job(fresh_connections)
    from . import execution
    event("django_ready", settings=settings_module(config), tasks=len(execution.registered()))
    connections.close_all()


@contextmanager
def fresh_connections(job: Job) -> Iterator[None]:
    """Around a job, what Django does around a request: connections past their
    CONN_MAX_AGE or left unusable are closed before and after."""
    from django.db import close_old_connections  # type: ignore[import-untyped, import-not-found, unused-ignore]
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def our_backends() -> list[Any]:
    """The TASKS backends that are ours, built (which registers nothing by itself:
    tasks register when their modules are imported). A BACKEND that does not import
    is none of ours."""
    from django.conf import settings  # type: ignore[import-untyped, import-not-found, unused-ignore]

    from . import compat
    from .backend import TaskBackend
    built = []
    for alias in getattr(settings, "TASKS", {}):
        try:
            built.append(compat.task_backends()[alias])
        except compat.InvalidTaskBackend:
            continue
    return [backend for backend in built if isinstance(backend, TaskBackend)]


def testing_config(alias: str = "default") -> Config:
    """The queue in DATABASES[alias] as Django has it now (in a test, the test
    database), its queues those of the TaskBackends kept there: for a test's
    `prefork.testing.inline(testing_config())`."""
    from django.db import connections  # type: ignore[import-untyped, import-not-found, unused-ignore]
    queues = [queue for backend in our_backends() if backend.database == alias
              for queue in sorted(backend.queues)]
    config = _on_database(connections[alias])
    return config.replace(queues=list(dict.fromkeys(queues))) if queues else config


def migrate_database(connection: Any) -> None:
    """The Django migration's step: prefork's migrate on the database `connection`
    is for, when a TaskBackend keeps its queue there (else nothing)."""
    if connection.alias not in ({backend.database for backend in our_backends()} or {"default"}):
        return
    store = open_store(_on_database(connection), create=True)
    try:
        applied = store.migrate()
    finally:
        store.close()
    event("django_migrated", database=connection.alias, applied=",".join(map(str, applied)))


def _on_database(connection: Any) -> Config:
    """The configuration (as the CLI reads it) with the queue on Django's `connection`."""
    settings_dict = connection.settings_dict
    return config_module.load().replace(dsn=database.dsn_of(connection.alias, settings_dict),
                                        db_password=settings_dict.get("PASSWORD") or None)


def _setup(module: str) -> None:
    """django.setup() once, with `module` as its settings (found from the working
    directory, as manage.py finds them)."""
    global _set_up
    if _set_up is not None:
        if _set_up != module:
            raise UserError(f"Django is set up with {_set_up!r} already, not {module!r}")
        return
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    os.environ["DJANGO_SETTINGS_MODULE"] = module
    try:
        import django  # type: ignore[import-untyped, import-not-found, unused-ignore]
        django.setup()
    except Exception as exc:   # the settings' own error, at start, in one line
        raise UserError(f"cannot set Django up with settings {module!r}: "
                        f"{type(exc).__name__}: {exc}") from exc
    _set_up = module
