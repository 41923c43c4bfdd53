"""A store that connects on its first use, not before.

A child forked per job (--max-items 1) is handed its job by the parent, which
claims it and writes its completion: when the job simply succeeds, the child
never needs the database, and a connection (its handshake, its set-up, and the
server's thread for it) would be most of the child's cost. Whatever does need
one (job.transaction(), a failure to record, a job to give back) opens it then.
"""
from typing import Any, Callable, ContextManager, Optional

from ..config import Config
from ..jobs import Job
from .contract import Store


class LazyStore:
    """Stands in for the Store open_store(config) returns, opening it on first use."""

    def __init__(self, config: Config, open_store: Callable[[Config], Store]) -> None:
        self._config = config
        self._open_store = open_store
        self._store: Optional[Store] = None

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not define: each such use needs the real store.
        if self._store is None:
            self._store = self._open_store(self._config)
        return getattr(self._store, name)

    def completing(self, job: Job) -> ContextManager[Any]:
        """job.transaction()'s: declared here so that a LazyStore is a Job's store."""
        completing: Callable[[Job], ContextManager[Any]] = self.__getattr__("completing")
        return completing(job)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
