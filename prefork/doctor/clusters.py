"""What `doctor` concludes about the server's place in a topology (a single server, a
Galera node, a Group Replication member, a replica, a primary with a binary log),
from values the server reported (topology.py reads them). Pure: every decision here
is a function of its arguments, so each can be checked on given values, including
those of servers this machine cannot run (MySQL Group Replication)."""
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from .checks import Check, Status

TOPOLOGY, GALERA, GALERA_SESSION, GALERA_WRITERS, GROUP_REPLICATION, BINARY_LOG = (
    "topology", "galera", "galera session", "galera writers", "group replication",
    "binary log")
ONE_WRITER = ("send every queue connection (supervisors, producers, the dashboard) to one "
              "node, as MaxScale's readwritesplit or HAProxy with one active backend does")
AFTER_SYNC = "AFTER_SYNC"


@dataclass(frozen=True)
class GroupMember:
    """A row of performance_schema.replication_group_members."""
    member_id: str
    host: str
    port: int
    state: str    # ONLINE, RECOVERING, OFFLINE, ERROR, UNREACHABLE
    role: str     # PRIMARY or SECONDARY

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def on(value: Optional[str]) -> bool:
    """A server's boolean as SHOW VARIABLES prints it (ON, 1, YES, TRUE)."""
    return (value or "").upper() in ("ON", "1", "YES", "TRUE")


def judge_role(variables: Mapping[str, str], replicating: Optional[int],
               galera: bool, group: bool) -> Check:
    """A replica or a read-only server fails (the queue writes on every path); else
    which kind of server this is, the checks that follow being the kind's own."""
    if replicating:
        return Check(TOPOLOGY, Status.FAIL, f"this server is a replica ({replicating} "
                     "replication threads running): what the queue writes here is not on "
                     "the primary, and is lost or conflicts when a replica is promoted; "
                     "point the DSN at the primary")
    if group:   # a secondary is read-only: the group replication check says whose it is
        return Check(TOPOLOGY, Status.OK, "a Group Replication member: see the group "
                     "replication check")
    read_only = [name for name in ("super_read_only", "read_only") if on(variables.get(name))]
    if read_only:
        return Check(TOPOLOGY, Status.FAIL, f"{read_only[0]} is ON: every enqueue, claim and "
                     "heartbeat is refused here; point the DSN at the writable primary (or "
                     "SET GLOBAL read_only = OFF if this is the primary)")
    if galera:
        return Check(TOPOLOGY, Status.OK, "a Galera cluster node (wsrep_on): see the galera "
                     "checks")
    unknown = "" if replicating is not None else " (whether it replicates could not be read)"
    return Check(TOPOLOGY, Status.OK, f"a single server: no Galera, no Group Replication, "
                 f"writable{unknown}")


def judge_galera(variables: Mapping[str, str], status: Mapping[str, str]) -> Check:
    """The node's own state: ready, synced, in the Primary component, ROW binlog format."""
    node = variables.get("wsrep_node_name") or "this node"
    size = status.get("wsrep_cluster_size", "?")
    state = status.get("wsrep_local_state_comment", "?")
    cluster = status.get("wsrep_cluster_status", "?")
    if not on(status.get("wsrep_ready")) or cluster != "Primary":
        return Check(GALERA, Status.FAIL, f"{node} is not ready (wsrep_ready "
                     f"{status.get('wsrep_ready', '?')}, cluster status {cluster}, {state}): "
                     "it refuses queries (error 1047); point the DSN at a synced node of the "
                     "Primary component")
    if variables.get("binlog_format", "ROW").upper() != "ROW":
        return Check(GALERA, Status.FAIL, f"binlog_format is {variables['binlog_format']}: "
                     "Galera replicates only ROW events; set binlog_format = ROW")
    if state != "Synced":
        return Check(GALERA, Status.WARN, f"{node} is {state}, not Synced: it may lag the "
                     "cluster or pause it (flow control); wait for Synced before going live")
    return Check(GALERA, Status.OK, f"{node}, Synced, in the Primary component of {size} "
                 f"node{'s' if size != '1' else ''}")


def judge_galera_session(retry_autocommit: Optional[str]) -> Check:
    """wsrep_retry_autocommit as a queue session has it. The queue sets it to 0: a node
    that silently runs again a statement the cluster aborted could commit part of a
    claim script (START TRANSACTION ... COMMIT in one round trip) on its own."""
    if retry_autocommit is not None and int(retry_autocommit) == 0:
        return Check(GALERA_SESSION, Status.OK, "wsrep_retry_autocommit = 0 in a queue "
                     "session: a statement the cluster aborts fails, and the queue retries "
                     "its whole transaction")
    return Check(GALERA_SESSION, Status.FAIL, f"wsrep_retry_autocommit = {retry_autocommit} "
                 "in a queue session: the node may run again alone a statement the cluster "
                 "aborted, and commit part of a claim; use the mariadb dialect (it sets 0), "
                 "or let the account set it")


def judge_galera_writers(live_supervisors: int, hosts: int, cluster_size: int,
                         cert_failures: int, bf_aborts: int) -> Check:
    """Whether writes arrive through several nodes, as far as one node can tell: its
    certification failures and brute-force aborts are the conflicts other nodes'
    writes caused. The registry does not record the node each supervisor writes
    through, so that is not compared."""
    said = f"{live_supervisors} live supervisor{'s' if live_supervisors != 1 else ''} on " \
           f"{hosts} host{'s' if hosts != 1 else ''}"
    if cert_failures or bf_aborts:
        return Check(GALERA_WRITERS, Status.WARN, f"{said}; {cert_failures} certification "
                     f"failures and {bf_aborts} brute-force aborts on this node since it "
                     "started: writes through other nodes conflict with this one's; each "
                     "costs a retry (correct, but about 0.6x the jobs/s of one writer "
                     f"node); for speed, {ONE_WRITER}")
    if cluster_size <= 1:
        return Check(GALERA_WRITERS, Status.OK, f"{said}; a one-node cluster: every writer "
                     "goes through this node")
    return Check(GALERA_WRITERS, Status.OK, f"{said}; no certification conflict on this node "
                 "since it started")


def judge_group_replication(single_primary: bool, member_id: str,
                            members: Sequence[GroupMember]) -> Check:
    """This member's state and role, and the group's mode."""
    this = next((member for member in members if member.member_id == member_id), None)
    if this is None or this.state != "ONLINE":
        state = this.state if this else "not in the group"
        return Check(GROUP_REPLICATION, Status.FAIL, f"this member is {state}, not ONLINE: "
                     "it does not take writes; point the DSN at an ONLINE primary")
    online = sum(member.state == "ONLINE" for member in members)
    group = f"{online} of {len(members)} members ONLINE"
    if not single_primary:
        return Check(GROUP_REPLICATION, Status.WARN, f"multi-primary, {group}: writes through "
                     "several members fail certification against each other (each costs a "
                     "retry); send every queue connection to one member, or run the group "
                     "single-primary")
    if this.role != "PRIMARY":
        primary = next((member.address for member in members if member.role == "PRIMARY"),
                       "the primary")
        return Check(GROUP_REPLICATION, Status.FAIL, f"single-primary, and this member is a "
                     f"SECONDARY (read-only), {group}: point the DSN at {primary}")
    return Check(GROUP_REPLICATION, Status.OK, f"single-primary, this member is the PRIMARY, "
                 f"{group}")


def judge_binary_log(variables: Mapping[str, str]) -> Check:
    """A server with a binary log may have replicas, and a failover to one keeps only
    what reached it: with asynchronous replication, acknowledged completions can be
    lost (the jobs run again); semi-sync with AFTER_SYNC keeps them."""
    if not on(variables.get("log_bin")):
        return Check(BINARY_LOG, Status.OK, "off: no replica copies this server, so no "
                     "failover can lose its commits (nor take over from it)")
    enabled = on(variables.get("rpl_semi_sync_source_enabled")
                 or variables.get("rpl_semi_sync_master_enabled"))
    wait_point = (variables.get("rpl_semi_sync_source_wait_point")
                  or variables.get("rpl_semi_sync_master_wait_point") or "").upper()
    if not enabled:
        return Check(BINARY_LOG, Status.WARN, "on, replication asynchronous: after a failover "
                     "to a replica, completions this server acknowledged can be lost and their "
                     "jobs run again; enable semi-sync replication with the AFTER_SYNC wait "
                     "point (rpl_semi_sync_master_* on MariaDB, rpl_semi_sync_source_* on MySQL)")
    if wait_point != AFTER_SYNC:
        return Check(BINARY_LOG, Status.WARN, f"on, semi-sync waiting {wait_point or '?'}: "
                     "others see a commit before a replica has it, and a failover can lose it; "
                     "set the semi-sync wait point to AFTER_SYNC")
    return Check(BINARY_LOG, Status.OK, "on, semi-sync AFTER_SYNC: a replica has every commit "
                 "before anyone sees it, so a failover loses no acknowledged completion")
