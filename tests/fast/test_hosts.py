"""May a session write to the server it reached? The decision of
prefork/store/mysql/hosts.py on the role row of its set-up script and, on a MySQL
Group Replication member, the member's view of its group (values as the server
gives them: MySQL and Group Replication cannot be run on this machine)."""
import pytest

from prefork.store.mysql.hosts import MemberView, ServerRole, judged

PLAIN = ServerRole(0, None, None, None)
GALERA = ServerRole(0, "ON", "Synced", None)
GROUP = ServerRole(0, None, None, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
PRIMARY_OF_THREE = MemberView("ONLINE", "PRIMARY", 3, 3)


@pytest.mark.parametrize("role", [PLAIN, GALERA, GROUP])
def test_a_writable_server_is_taken(role):
    member = PRIMARY_OF_THREE if role is GROUP else None
    assert judged(role, member) is None


@pytest.mark.parametrize("role", [PLAIN._replace(read_only=1), GALERA._replace(read_only=1),
                                  GROUP._replace(read_only=1)])
def test_a_read_only_server_is_refused_whatever_else_it_is(role):
    assert "read-only" in judged(role, None)


@pytest.mark.parametrize("ready, state, expected", [
    ("OFF", "Synced", "not ready (wsrep_ready is OFF)"),
    ("ON", "Donor/Desynced", "Donor/Desynced, not Synced"),
    ("ON", "Joining", "Joining, not Synced"),
])
def test_a_galera_node_not_ready_or_not_synced_is_refused(ready, state, expected):
    assert expected in judged(GALERA._replace(wsrep_ready=ready, wsrep_state=state), None)


@pytest.mark.parametrize("member, expected", [
    # read_only OFF and still no writes: the member is out of its group ...
    (MemberView("OFFLINE", "SECONDARY", 1, 1), "is OFFLINE, not ONLINE"),
    (MemberView("ERROR", "SECONDARY", 1, 3), "is ERROR, not ONLINE"),
    (MemberView("RECOVERING", "SECONDARY", 3, 3), "is RECOVERING, not ONLINE"),
    (MemberView(None, None, 2, 2), "not in its Group Replication group"),
    # ... a secondary (super_read_only should be ON: refused even if it is not) ...
    (MemberView("ONLINE", "SECONDARY", 3, 3), "a SECONDARY, not the PRIMARY"),
    # ... or a primary cut off in a minority: ONLINE, its commits wait for the group.
    (MemberView("ONLINE", "PRIMARY", 1, 3), "reaches 1 of 3 members: a minority"),
    (MemberView("ONLINE", "PRIMARY", 2, 4), "reaches 2 of 4 members"),
])
def test_a_group_replication_member_that_may_not_take_writes_is_refused(member, expected):
    assert expected in judged(GROUP, member)


@pytest.mark.parametrize("member", [MemberView("ONLINE", "PRIMARY", 2, 3),   # one lost
                                    MemberView("ONLINE", "PRIMARY", 1, 1),   # a group of one
                                    MemberView("ONLINE", "PRIMARY", 5, 5)])
def test_a_primary_in_a_majority_is_taken(member):
    assert judged(GROUP, member) is None


def test_a_member_whose_group_the_account_may_not_read_is_judged_by_read_only_alone():
    assert judged(GROUP, None) is None
    assert "read-only" in judged(GROUP._replace(read_only=1), None)
