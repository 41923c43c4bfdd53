"""A TaskBackend's OPTIONS, checked when Django builds the backend: a typo or a
wrong type is an ImproperlyConfigured naming the key, not a silent default."""
from dataclasses import dataclass, fields
from typing import Any, Mapping

from ...jobs import MAX_ATTEMPTS_LIMIT

RESULT_LIMIT = 64 * 1024   # bytes of a return value's JSON, by default


@dataclass(frozen=True)
class Options:
    database: str = "default"         # the DATABASES alias holding the queue's tables
    max_attempts: int = 5             # runs of a task before it reads FAILED
    max_result_bytes: int = RESULT_LIMIT   # a larger return value fails the task
    # get_result()'s errors carry the traceback the worker kept of each of the last
    # failed attempts (as error_detail allows: `class` keeps frames, no message).
    store_traceback: bool = True

    @classmethod
    def parsed(cls, backend_alias: str, raw: Mapping[str, Any]) -> "Options":
        from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped, import-not-found, unused-ignore]
        known = {field.name: field for field in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            field = known.get(key)
            if field is None:
                raise ImproperlyConfigured(
                    f"TASKS[{backend_alias!r}]['OPTIONS'] has an unknown key {key!r} "
                    f"(known: {', '.join(known)})")
            wanted = type(field.default)
            if type(value) is not wanted or not _in_range(key, value):
                raise ImproperlyConfigured(
                    f"TASKS[{backend_alias!r}]['OPTIONS'][{key!r}] must be "
                    f"{_described(key, wanted)}, not {value!r}")
            values[key] = value
        return cls(**values)


def _in_range(key: str, value: Any) -> bool:
    if key == "max_attempts":
        return bool(1 <= value <= MAX_ATTEMPTS_LIMIT)
    if key == "max_result_bytes":
        return bool(value >= 0)
    if key == "database":
        return bool(value)
    return True


def _described(key: str, wanted: type) -> str:
    if key == "max_attempts":
        return f"an int from 1 to {MAX_ATTEMPTS_LIMIT}"
    if key == "max_result_bytes":
        return "an int >= 0"
    return {str: "a non-empty str", bool: "True or False"}.get(wanted, wanted.__name__)
