"""The queue's database taken from Django's: a prefork DSN built from a DATABASES
entry (never with its password, which travels in the Config's db_password), and the
configuration a `--django` command runs with."""
import os
from typing import Any, Mapping
from urllib.parse import quote

from ...config import Config
from ...errors import UserError

MYSQL_ENGINES = ("django.db.backends.mysql",)
SQLITE_ENGINES = ("django.db.backends.sqlite3",)


def dsn_of(alias: str, settings_dict: Mapping[str, Any]) -> str:
    """The prefork DSN of a DATABASES entry: mysql://USER@HOST:PORT/NAME (a HOST that
    is a path is the server's socket) or sqlite:////absolute/NAME."""
    engine = settings_dict.get("ENGINE", "")
    name = str(settings_dict.get("NAME") or "")
    if engine in SQLITE_ENGINES:
        if not name or name == ":memory:" or name.startswith("file:"):
            raise UserError(f"DATABASES[{alias!r}] is an in-memory SQLite database: "
                            "the queue needs a file its processes share")
        return "sqlite:///" + quote(os.path.abspath(name))
    if engine in MYSQL_ENGINES:
        if not name:
            raise UserError(f"DATABASES[{alias!r}] names no database (NAME)")
        user = quote(str(settings_dict.get("USER") or "root"), safe="")
        host = str(settings_dict.get("HOST") or "localhost")
        database = quote(name, safe="")
        if host.startswith("/"):
            return f"mysql://{user}@localhost/{database}?unix_socket={quote(host)}"
        port = settings_dict.get("PORT") or 3306
        return f"mysql://{user}@{host}:{port}/{database}"
    raise UserError(f"DATABASES[{alias!r}] uses {engine or 'no ENGINE'}: the queue runs on "
                    "MySQL/MariaDB or SQLite (django.db.backends.mysql or .sqlite3)")


def queue_config(config: Config, alias: str, settings_dict: Mapping[str, Any],
                 queues: list[str]) -> Config:
    """`config` with what it leaves at its defaults taken from Django: the DSN (and
    password) of DATABASES[alias], the queues of the TASKS backends."""
    changes: dict[str, Any] = {}
    if config.source("dsn") == "default":
        changes["dsn"] = dsn_of(alias, settings_dict)
        password = settings_dict.get("PASSWORD")
        if password:
            changes["db_password"] = str(password)
    if config.source("queues") == "default" and queues:
        changes["queues"] = queues
    return config.replace(**changes) if changes else config
