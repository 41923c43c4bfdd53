"""Which server a DSN reached, from the version string of its handshake: the
flavor and version, the refusal of a server without SKIP LOCKED, and the
dialect `auto` picks (prefork/store/mysql/server.py)."""
import pytest

from prefork.errors import UserError
from prefork.store.mysql.server import Flavor, check_supported, dialect_for, parse_version


@pytest.mark.parametrize("text,flavor,version", [
    # MariaDB behind the replication prefix it sends to old clients
    ("5.5.5-10.6.12-MariaDB-log", Flavor.MARIADB, (10, 6, 12)),
    ("5.5.5-10.11.19-MariaDB-0+deb12u1", Flavor.MARIADB, (10, 11, 19)),
    ("11.4.2-MariaDB", Flavor.MARIADB, (11, 4, 2)),
    ("10.6.0-MariaDB-1:10.6.0+maria~focal", Flavor.MARIADB, (10, 6, 0)),
    # MySQL: distribution suffixes, a plain release, a cloud build
    ("8.0.36-0ubuntu0.22.04.1", Flavor.MYSQL, (8, 0, 36)),
    ("8.4.0", Flavor.MYSQL, (8, 4, 0)),
    ("8.0.35-google", Flavor.MYSQL, (8, 0, 35)),
    ("9.1", Flavor.MYSQL, (9, 1, 0)),
])
def test_the_flavor_and_version_are_read_from_the_servers_words(text, flavor, version):
    server = parse_version(text)
    assert (server.flavor, server.version, server.text) == (flavor, version, text)
    check_supported(server)   # all of these have SKIP LOCKED


@pytest.mark.parametrize("text,found,minimum", [
    ("5.7.44-log", "MySQL 5.7.44", "MySQL 8.0.1"),
    ("8.0.0-dmr", "MySQL 8.0.0", "MySQL 8.0.1"),
    ("5.5.5-10.5.23-MariaDB-log", "MariaDB 10.5.23", "MariaDB 10.6.0"),
    ("10.3.39-MariaDB", "MariaDB 10.3.39", "MariaDB 10.6.0"),
])
def test_a_server_without_skip_locked_is_refused_naming_its_version_and_the_minimum(
        text, found, minimum):
    with pytest.raises(UserError) as refused:
        check_supported(parse_version(text))
    message = str(refused.value)
    assert found in message and minimum in message and text in message, message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "MariaDB", "v8", "eight.0.1"])
def test_an_unreadable_version_is_a_one_line_error(text):
    with pytest.raises(UserError, match="cannot read the database server's version"):
        parse_version(text)


@pytest.mark.parametrize("text,setting,dialect", [
    ("8.4.0", "auto", Flavor.MYSQL),
    ("5.5.5-10.11.19-MariaDB-0+deb12u1", "auto", Flavor.MARIADB),
    ("5.5.5-10.11.19-MariaDB-0+deb12u1", "mysql", Flavor.MYSQL),   # how it is tested here
    ("5.5.5-10.11.19-MariaDB-0+deb12u1", "mariadb", Flavor.MARIADB),
    ("8.0.36-0ubuntu0.22.04.1", "mysql", Flavor.MYSQL),
])
def test_the_dialect_is_the_settings_or_for_auto_the_servers(text, setting, dialect):
    assert dialect_for(parse_version(text), setting) is dialect


def test_the_mariadb_dialect_is_refused_on_mysql():
    with pytest.raises(UserError, match="dialect = mariadb cannot run on MySQL 8.4.0"):
        dialect_for(parse_version("8.4.0"), "mariadb")
