"""The hosts a mysql:// DSN names, and which of them a session goes to.

    mysql://queue@db1:3306,db2:3306,db3/jobs

A session goes to the first host that takes the connection and may be written
to: not read-only (a replica), and on Galera a node that is ready and Synced.
A host passed over for that is logged, one line naming it and why.

A process stays with the host it reached while that works: its next connection
tries that host first, then the others in the DSN's order. So the children a
supervisor forks go straight to its host, and a host that comes back after a
failover (the old primary, read-only now or behind) is not gone back to while
the new primary answers.
"""
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ...errors import DatabaseUnavailable
from ...logs import event
from .dsn import Address, shown

Connected = TypeVar("Connected")
SYNCED = "Synced"

# Per DSN host list: the host this process last reached (inherited across a fork).
_reached: dict[tuple[Address, ...], Address] = {}


class HostFailed(Exception):
    """This host cannot be used now: it did not take the connection, or it must not
    be written to. The message is the reason, one line."""


def refusal(read_only: Any, wsrep_ready: Any, wsrep_state: Any) -> str | None:
    """Why a server must not be written to, from its role row (host_queries.py); None
    when it may be."""
    if int(read_only or 0):
        return "it is read-only (read_only is ON): a replica is never written to"
    if wsrep_ready is None:   # not a Galera node
        return None
    if str(wsrep_ready).upper() != "ON":
        return "its Galera node is not ready (wsrep_ready is OFF)"
    if str(wsrep_state) != SYNCED:
        return f"its Galera node is {wsrep_state}, not {SYNCED}"
    return None


def connect_first(hosts: tuple[Address, ...], attempt: Callable[[Address], Connected],
                  where: Callable[[Sequence[Address]], str]) -> tuple[Connected, Address]:
    """attempt(host) on each host in turn (the one last reached first) until one
    connects and may be written to (attempt raises HostFailed for one that does not):
    its connection and the host. DatabaseUnavailable naming every host's reason when
    none does; where(hosts) names them, redacted."""
    reasons = []
    for address in _in_turn(hosts):
        try:
            connected = attempt(address)
        except HostFailed as exc:
            if len(hosts) == 1:
                raise DatabaseUnavailable(f"cannot connect to {where(hosts)}: {exc}") from None
            reasons.append(f"{shown([address])}: {exc}")
            event("database_host_skipped", level=logging.WARNING, host=shown([address]),
                  reason=str(exc))
            continue
        _reached[hosts] = address
        return connected, address
    raise DatabaseUnavailable(f"cannot connect to {where(hosts)}: {'; '.join(reasons)}")


def _in_turn(hosts: tuple[Address, ...]) -> list[Address]:
    reached = _reached.get(hosts)
    if reached is None:
        return list(hosts)
    return [reached, *(address for address in hosts if address != reached)]
