"""The peers of the bench's `enqueue_one` row: how each Python queue a MySQL team
might pick instead enqueues one job, set up as its documentation says, on the same
server, in a scratch database of its own (their tables are theirs, never in the
queue's database). Each is imported only in the process that runs it
(enqueue_loop.py), and only when installed.

- huey: SqlHuey (huey.contrib.sql_huey) on peewee's MySQLDatabase (PyMySQL);
- django-q2: async_task() with the Django ORM as its broker (mysqlclient);
- django-tasks-db: a django-tasks Task's enqueue() on its database backend (mysqlclient);
- Celery: a task's delay() on kombu's SQLAlchemy transport (mysqlclient).
"""
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

# An enqueue of one job with this payload.
Enqueue = Callable[[dict[str, Any]], object]
# Where a peer keeps its tables: host, port, user, password, database.
Database = Mapping[str, Any]

NOOP_TASK = "prefork.bench.peers.noop"


def noop(payload: dict[str, Any]) -> None:
    """The job each peer enqueues (nobody runs it here)."""


def huey(db: Database) -> Enqueue:
    from huey.contrib.sql_huey import SqlHuey  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from peewee import MySQLDatabase  # type: ignore[import-untyped, import-not-found, unused-ignore]
    queue = SqlHuey("prefork-bench", database=MySQLDatabase(
        db["database"], host=db["host"], port=db["port"], user=db["user"],
        password=db["password"] or ""))
    return queue.task(name=NOOP_TASK)(noop)   # calling the task enqueues it


def django_q2(db: Database) -> Enqueue:
    # Its INFO line per enqueue left out: the peer's own time, not its log's, is measured.
    _django(db, ["django_q"], Q_CLUSTER={"name": "prefork-bench", "orm": "default",
                                         "log_level": "WARNING"})
    from django_q.tasks import async_task  # type: ignore[import-untyped, import-not-found, unused-ignore]
    return lambda payload: async_task(NOOP_TASK, payload)


def django_tasks_db(db: Database) -> Enqueue:
    _django(db, ["django_tasks", "django_tasks_db"],
            TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}})
    from .peer_tasks import noop as noop_task
    return noop_task.enqueue


def celery(db: Database) -> Enqueue:
    from celery import Celery  # type: ignore[import-untyped, import-not-found, unused-ignore]
    app = Celery("prefork-bench", broker=f"sqla+{_url(db)}")
    return app.task(name=NOOP_TASK)(noop).delay


# name: (the module that says it is installed, its setup)
PEERS: dict[str, tuple[str, Callable[[Database], Enqueue]]] = {
    "huey": ("huey", huey), "django-q2": ("django_q", django_q2),
    "django-tasks-db": ("django_tasks_db", django_tasks_db), "celery": ("celery", celery)}


def installed() -> list[str]:
    """The peers installed here, in PEERS' order."""
    return [name for name, (module, _) in PEERS.items() if importlib.util.find_spec(module)]


def _django(db: Database, apps: list[str], **settings: Any) -> None:
    """Django configured on the scratch database, its apps' tables migrated."""
    import django  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from django.conf import settings as django_settings  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from django.core.management import call_command  # type: ignore[import-untyped, import-not-found, unused-ignore]
    django_settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.mysql", "NAME": db["database"],
                               "HOST": db["host"], "PORT": db["port"], "USER": db["user"],
                               "PASSWORD": db["password"] or ""}},
        INSTALLED_APPS=["django.contrib.contenttypes", *apps], USE_TZ=True,
        SECRET_KEY="prefork-bench", **settings)
    django.setup()
    call_command("migrate", verbosity=0)


def _url(db: Database) -> str:
    """A SQLAlchemy URL of the scratch database (its default MySQL driver, mysqlclient)."""
    password = f":{quote(db['password'], safe='')}" if db["password"] else ""
    return (f"mysql://{quote(db['user'], safe='')}{password}@{db['host']}:{db['port']}/"
            f"{db['database']}")
