"""The hosts a mysql:// DSN names, and which of them a session goes to.

    mysql://queue@db1:3306,db2:3306,db3/jobs

A session goes to the first host that takes the connection and may be written
to: not read-only (a replica); on Galera a node that is ready and Synced; in a
MySQL Group Replication group an ONLINE PRIMARY that reaches a majority.
A host passed over for that is logged, one line naming it and why.

A process stays with the host it reached while that works: its next connection
tries that host first, then the others in the DSN's order. So the children a
supervisor forks go straight to its host, and a host that comes back after a
failover (the old primary, read-only now or behind) is not gone back to while
the new primary answers.
"""
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional, TypeVar

import pymysql
from pymysql.constants import ER

from ...errors import DatabaseUnavailable
from ...logs import event
from .dsn import Address, shown
from .host_queries import (GROUP_MEMBER, SERVER_ROLE_MARIADB, SERVER_ROLE_MYSQL,
                           SERVER_ROLE_READ_ONLY)

Connected = TypeVar("Connected")
SYNCED = "Synced"
ONLINE, PRIMARY = "ONLINE", "PRIMARY"   # Group Replication: a member that takes writes

# Per DSN host list: the host this process last reached (inherited across a fork).
_reached: dict[tuple[Address, ...], Address] = {}


class HostFailed(Exception):
    """This host cannot be used now: it did not take the connection, or it must not
    be written to. The message is the reason, one line."""


class ServerRole(NamedTuple):
    """The set-up script's last row (host_queries.SERVER_ROLE_*)."""
    read_only: Any
    wsrep_ready: Any   # NULL: not a Galera node
    wsrep_state: Any
    group_name: Any    # NULL: not a configured Group Replication member


class MemberView(NamedTuple):
    """A Group Replication member as it sees itself and its group (GROUP_MEMBER)."""
    state: Optional[str]   # None: it has no row in its group
    role: Optional[str]
    reachable: int         # members it can reach (not UNREACHABLE), itself included
    members: int


def read_role(conn: pymysql.connections.Connection, mariadb: bool, settings: list[str],
              args: tuple[int, ...]) -> tuple[Any, ...]:
    """The session's set-up script: its settings, then the server's role (a ServerRole
    row), in one round trip; the role's row. A script stops at its first error, the
    statements before it in force: then the role is read alone."""
    role_query = SERVER_ROLE_MARIADB if mariadb else SERVER_ROLE_MYSQL
    try:
        return _last_row(conn, [*settings, role_query], args)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        if code == ER.UNKNOWN_SYSTEM_VARIABLE:   # no Galera: wsrep_retry_autocommit unknown
            return _last_row(conn, [role_query], ())
        if code == ER.NO_SUCH_TABLE and not mariadb:   # no performance_schema tables
            return _last_row(conn, [SERVER_ROLE_READ_ONLY], ())
        raise


def _last_row(conn: pymysql.connections.Connection, statements: list[str],
              args: tuple[int, ...]) -> tuple[Any, ...]:
    """The first row of a script's last statement. The server answers every statement
    at once; each answer is read in turn (raising the error of any)."""
    with conn.cursor() as cursor:
        cursor.execute(";\n".join(statements), args or None)
        while cursor.nextset():
            pass
        row = cursor.fetchone()
    assert row is not None, "a role query returns one row"
    return tuple(row)


def refusal(row: Sequence[Any], conn: pymysql.connections.Connection) -> Optional[str]:
    """Why the server of this connection must not be written to, from its role row;
    None when it may. On a Group Replication member that is not read-only, one more
    statement reads how its group sees it (a plain server pays nothing more)."""
    role = ServerRole(*row)
    if role.group_name is None or int(role.read_only or 0):
        return judged(role, None)
    return judged(role, _member_view(conn))


def judged(role: ServerRole, member: Optional[MemberView]) -> Optional[str]:
    """refusal()'s decision. member: a Group Replication member's view, None when
    not one or when the account may not read it (read_only alone decides then)."""
    if int(role.read_only or 0):
        return "it is read-only (read_only is ON): a replica is never written to"
    if member is not None:
        return group_refusal(member)
    if role.wsrep_ready is None:   # not a Galera node
        return None
    if str(role.wsrep_ready).upper() != "ON":
        return "its Galera node is not ready (wsrep_ready is OFF)"
    if str(role.wsrep_state) != SYNCED:
        return f"its Galera node is {role.wsrep_state}, not {SYNCED}"
    return None


def group_refusal(member: MemberView) -> Optional[str]:
    """Why a Group Replication member with read_only OFF must not be written to."""
    if member.state is None:
        return "it is not in its Group Replication group (no member row for it)"
    if member.state != ONLINE:
        return f"its Group Replication member is {member.state}, not {ONLINE}"
    if member.role != PRIMARY:
        return f"its Group Replication member is a {member.role}, not the {PRIMARY}"
    if member.reachable * 2 <= member.members:
        return (f"its Group Replication member reaches {member.reachable} of "
                f"{member.members} members: a minority, whose commits wait for the group")
    return None


def _member_view(conn: pymysql.connections.Connection) -> Optional[MemberView]:
    """GROUP_MEMBER's row; None when the account may not read
    performance_schema.replication_group_members (SELECT on it is needed)."""
    try:
        with conn.cursor() as cursor:
            cursor.execute(GROUP_MEMBER)
            row = cursor.fetchone()
    except pymysql.err.OperationalError as exc:
        if exc.args[0] != ER.TABLEACCESS_DENIED_ERROR:
            raise
        return None
    assert row is not None, "GROUP_MEMBER returns one row"
    return MemberView(*row)


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
