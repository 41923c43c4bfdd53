"""The part of the store contract (contract.py) that a supervisor uses after a
reconnection: the jobs reserved in its name that none of its workers holds."""
import abc
from collections.abc import Callable
from typing import NamedTuple


class HeldJob(NamedTuple):
    """A reserved job of a supervisor, as prune_silent() and hand_back_strays()
    show it to `spare`."""
    job_id: int
    worker: str              # host:pid of the child that claimed it
    seconds_since_write: float   # since its claim or its last extension (database clock)


class StrayHandBack(abc.ABC):
    @abc.abstractmethod
    def hand_back_strays(self, process_id: int, spare: Callable[[HeldJob], bool]) -> list[int]:
        """Give back at once the jobs reserved under this supervisor's id that spare()
        does not keep (its workers hold them): after a failover, the server reached may
        hold jobs in our name whose end it never learnt. Uncharged, as release() does:
        their run was not cut (each ran to its end, or never started). The ids given
        back, ready again (or cancelled, when that is pending)."""
