"""The last statement of a session's set-up script (session._set_up): may we write
to this server? One row of (read-only, wsrep_ready, wsrep local state, Group
Replication's group name), read in the set-up's round trip (hosts.ServerRole).
Per server flavor, not per dialect: the variables are the server's own."""

# MariaDB: read_only (an account with SUPER or READ ONLY ADMIN may write all the
# same: we do not). On a Galera node (wsrep_on), the node's readiness and
# state; IF() reads the status table only there (elsewhere it costs nothing).
SERVER_ROLE_MARIADB = (
    "SELECT @@global.read_only,"
    " IF(@@global.wsrep_on, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
    " WHERE VARIABLE_NAME = 'WSREP_READY'), NULL),"
    " IF(@@global.wsrep_on, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
    " WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'), NULL), NULL")

# MySQL 8: read_only, which super_read_only turns on with it (Group Replication
# sets it on the secondaries of a single-primary group, on a member that stopped
# replicating, and on one in ERROR with the default exit action). And the group's
# name when this server is configured as a member: GROUP_MEMBER is read then. Not
# @@group_replication_group_name, an unknown variable without the plugin (an
# error that stops the script); performance_schema.global_variables is readable
# by every account (replication_group_members needs a grant).
SERVER_ROLE_MYSQL = (
    "SELECT @@global.read_only, NULL, NULL,"
    " (SELECT NULLIF(VARIABLE_VALUE, '') FROM performance_schema.global_variables"
    " WHERE VARIABLE_NAME = 'group_replication_group_name')")

# MySQL without the performance_schema tables (started with performance_schema =
# OFF, or a server that only says it is MySQL): read_only alone decides.
SERVER_ROLE_READ_ONLY = "SELECT @@global.read_only, NULL, NULL, NULL"

# A Group Replication member: how it sees itself and its group. Its own state and
# role (NULL when it has no row), the members it can reach (not UNREACHABLE) and
# all it knows of (hosts.group_refusal). A member with read_only OFF may still not
# take writes: in a minority cut off from its group (it stays ONLINE, its commits
# wait for a majority), in ERROR with the OFFLINE_MODE exit action, or OFFLINE
# after a restart that did not start Group Replication (writes there would not
# reach the group).
GROUP_MEMBER = (
    "SELECT (SELECT MEMBER_STATE FROM performance_schema.replication_group_members"
    " WHERE MEMBER_ID = @@global.server_uuid),"
    " (SELECT MEMBER_ROLE FROM performance_schema.replication_group_members"
    " WHERE MEMBER_ID = @@global.server_uuid),"
    " (SELECT COUNT(*) FROM performance_schema.replication_group_members"
    " WHERE MEMBER_STATE <> 'UNREACHABLE'),"
    " (SELECT COUNT(*) FROM performance_schema.replication_group_members)")
