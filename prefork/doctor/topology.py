"""The topology checks of `doctor` on MySQL and MariaDB: what the server says about
its place (variables, status, Group Replication's members, replication channels,
the registry's live supervisors), judged by clusters.py."""
from dataclasses import dataclass
from typing import Optional

import pymysql
from pymysql.constants import ER

from ..store.mysql.server import Flavor
from ..store.mysql.session import error_code
from .checks import Check, failure, reported_errors, run_check, skipped
from .clusters import (
    GALERA_SESSION,
    GALERA_WRITERS,
    GROUP_REPLICATION,
    TOPOLOGY,
    GroupMember,
    judge_binary_log,
    judge_galera,
    judge_galera_session,
    judge_galera_writers,
    judge_group_replication,
    judge_role,
    on,
)
from .queries import (
    GLOBAL_STATUS,
    GLOBAL_VARIABLES,
    GROUP_MEMBERS,
    LIVE_SUPERVISORS,
    REPLICA_CHANNELS,
    SESSION_RETRY_AUTOCOMMIT,
)
from .reads import named_values, rows

# performance_schema not readable by the account, or not there: "could not be read".
UNREADABLE = (ER.TABLEACCESS_DENIED_ERROR, ER.NO_SUCH_TABLE, ER.DBACCESS_DENIED_ERROR)


@dataclass(frozen=True)
class Place:
    """What the server said about where it stands."""
    variables: dict[str, str]
    status: dict[str, str]
    replicating: Optional[int]   # replication channels running; None: could not be read

    @property
    def galera(self) -> bool:
        return on(self.variables.get("wsrep_on"))

    @property
    def group(self) -> bool:
        return bool(self.variables.get("group_replication_group_name"))


def topology_checks(conn: pymysql.connections.Connection, flavor: Flavor,
                    supervisor_timeout: float, schema_current: bool) -> list[Check]:
    """The server's role, then its kind's checks: Galera's three, Group Replication's,
    or (a server of its own) the binary log's."""
    try:
        place = read_place(conn, flavor)
    except reported_errors() as exc:
        return [failure(TOPOLOGY, exc)]
    checks = [judge_role(place.variables, place.replicating, place.galera, place.group)]
    if place.galera:
        checks += [judge_galera(place.variables, place.status),
                   run_check(GALERA_SESSION,
                             lambda: judge_galera_session(_retry_autocommit(conn))),
                   run_check(GALERA_WRITERS, lambda: _writers(conn, place, supervisor_timeout))
                   if schema_current else skipped(GALERA_WRITERS, "the schema is not current")]
    elif place.group:
        checks.append(run_check(GROUP_REPLICATION, lambda: judge_group_replication(
            on(place.variables.get("group_replication_single_primary_mode")),
            place.variables.get("server_uuid", ""), _members(conn))))
    else:
        checks.append(judge_binary_log(place.variables))
    return checks


def read_place(conn: pymysql.connections.Connection, flavor: Flavor) -> Place:
    variables = named_values(conn, GLOBAL_VARIABLES)
    status = named_values(conn, GLOBAL_STATUS)
    if flavor is Flavor.MARIADB:
        replicating: Optional[int] = int(status.get("Slaves_running") or 0)
    else:
        replicating = _mysql_channels(conn)
    return Place(variables, status, replicating)


def _mysql_channels(conn: pymysql.connections.Connection) -> Optional[int]:
    try:
        return int(rows(conn, REPLICA_CHANNELS)[0][0])
    except pymysql.err.MySQLError as exc:
        if error_code(exc) in UNREADABLE:
            return None
        raise


def _retry_autocommit(conn: pymysql.connections.Connection) -> Optional[str]:
    found = rows(conn, SESSION_RETRY_AUTOCOMMIT)
    return str(found[0][1]) if found else None


def _writers(conn: pymysql.connections.Connection, place: Place,
             supervisor_timeout: float) -> Check:
    supervisors, hosts = rows(conn, LIVE_SUPERVISORS, (supervisor_timeout,))[0]
    return judge_galera_writers(int(supervisors), int(hosts),
                                int(place.status.get("wsrep_cluster_size") or 0),
                                int(place.status.get("wsrep_local_cert_failures") or 0),
                                int(place.status.get("wsrep_local_bf_aborts") or 0))


def _members(conn: pymysql.connections.Connection) -> list[GroupMember]:
    return [GroupMember(str(member_id), str(host), int(port), str(state), str(role))
            for member_id, host, port, state, role in rows(conn, GROUP_MEMBERS)]
