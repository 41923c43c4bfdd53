"""What a cancellation answers: which of the jobs asked for it cancelled now,
which its supervisor is stopping, which had already finished and which do not
exist. Shared by the stores, `prefork-queue cancel` and prefork.cancel()."""
from typing import NamedTuple


class CancelReport(NamedTuple):
    cancelled: list[int]   # ready or delayed: cancelled now, never run
    stopping: list[int]    # running: its supervisor stops it, then it ends cancelled
    finished: list[int]    # done, dead or cancelled already: left as they are
    missing: list[int]     # no such job (never was, or pruned)
