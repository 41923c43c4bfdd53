"""The last statement of a session's set-up script (session._set_up): may we write
to this server? One row of (read-only, wsrep_ready, wsrep local state), read in
the set-up's round trip. Per server flavor, not per dialect: the variables are
the server's own."""

# MariaDB: read_only (an account with SUPER or READ ONLY ADMIN may write all the
# same: we do not). On a Galera node (wsrep_on), the node's readiness and
# state; IF() reads the status table only there (elsewhere it costs nothing).
SERVER_ROLE_MARIADB = (
    "SELECT @@global.read_only,"
    " IF(@@global.wsrep_on, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
    " WHERE VARIABLE_NAME = 'WSREP_READY'), NULL),"
    " IF(@@global.wsrep_on, (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
    " WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'), NULL)")

# MySQL 8: read_only, which super_read_only turns on with it. Group Replication
# sets super_read_only on every member that may not take writes: the secondaries
# of a single-primary group, a member still recovering, one in ERROR (its default
# exit action, READ_ONLY).
SERVER_ROLE_MYSQL = "SELECT @@global.read_only, NULL, NULL"
