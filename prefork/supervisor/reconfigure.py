"""The config read anew on SIGHUP (load_new_config), and what the flags and the
environment override in it, said at start and at each reload (warn_overridden)."""
import logging
from typing import Any, Optional

from .. import config as config_module, logs, registry, schedules
from ..errors import UserError
from ..logs import event


def _why_refused(exc: Exception) -> str:
    """One line on a refused reload: our own message, an OSError's reason and path (the
    log file's), or else only the class (its message may quote the file's bytes)."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, OSError):
        return logs.os_error_text(exc)
    return logs.error_class(exc)


def load_new_config(flags: Any, path: Optional[str]) -> Optional[Any]:
    """The config file read anew and checked; None (logged) when something refuses it,
    and the old one stays in force."""
    try:
        new_config = config_module.load(flags, path=path)
        registry.import_apps(new_config.app)
        schedules.validate(new_config)   # commands and schedules, before applying
        logs.configure_from(new_config)  # last: a log file that cannot open refuses it
    except Exception as exc:   # whatever refused it: the old config stays in force
        event("config_reload_failed", level=logging.ERROR, error=_why_refused(exc))
        return None
    return new_config


def warn_overridden(config: Any) -> None:
    """Flags and the environment win over the config file: say so for each setting of
    the file they override, at start and at each reload, lest an edit seem ignored."""
    for overridden in config.overridden():
        event("config_overridden", file=config.path, **overridden._asdict())
