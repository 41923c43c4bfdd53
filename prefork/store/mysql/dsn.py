"""A mysql:// DSN, read: the hosts it names (one or several), the user, the
database and the options; and shown again, redacted, in messages.

    mysql://user@host:port/database[?unix_socket=/path]
    mysql://user@db1:3306,db2:3306,[::1]:3307/database

It never holds a password (PREFORK_QUEUE_DB_PASSWORD or db_password_file do).
"""
import functools
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ...errors import UserError

Address = tuple[str, int]
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 3306


def parse_dsn(dsn: str) -> dict[str, Any]:
    """mysql://user@host:port[,host:port...]/database[?unix_socket=/path] -> connect()'s
    arguments: the hosts, and the driver's keyword arguments but the host."""
    return dict(_parsed_dsn(dsn))


@functools.lru_cache(maxsize=8)
def _parsed_dsn(dsn: str) -> dict[str, Any]:
    """parse_dsn's work, once per DSN: the parent's first connect parses it, and a
    child forked per job (--max-items 1) inherits the answer instead of running
    urlsplit and parse_qs on its own (callers get a copy: the cache's stays as is)."""
    try:
        parts = urlsplit(dsn)
    except ValueError:   # a bracket the standard library refuses, as in "db1,[::1]"
        raise UserError("bad DSN: write an IPv6 host as [::1]:3306, each in its own "
                        "brackets") from None
    if parts.scheme not in ("mysql", "mariadb"):
        raise UserError(f"bad DSN: scheme must be mysql://, got {parts.scheme or 'none'}")
    if parts.password is not None:
        raise UserError("bad DSN: it must not contain a password; set PREFORK_QUEUE_DB_PASSWORD "
                        "or db_password_file")
    user = unquote(parts.username or "root")
    if ":" in user:   # an encoded colon: a password smuggled past the check above
        raise UserError("bad DSN: the user name must not contain ':' (encoded or not); set "
                        "the password in PREFORK_QUEUE_DB_PASSWORD or db_password_file")
    if not user.isprintable():
        raise UserError("bad DSN: the user name must not contain control characters")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise UserError("bad DSN: name the database, e.g. mysql://user@127.0.0.1:3306/jobs")
    listed = parse_hosts(parts.netloc.rpartition("@")[2])
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    unknown = set(options) - {"unix_socket"}
    if unknown:
        raise UserError(f"bad DSN: unknown option {sorted(unknown)[0]!r}")
    if options.get("unix_socket") and len(listed) > 1:
        raise UserError("bad DSN: a unix_socket is one server's: name several hosts "
                        "without it")
    return {"hosts": listed, "user": user, "database": database,
            "unix_socket": options.get("unix_socket")}


def redacted(dsn_args: dict[str, Any]) -> str:
    """The DSN of these arguments (parse_dsn's, or one host's), never a password."""
    listed = dsn_args.get("hosts") or ((dsn_args["host"], dsn_args["port"]),)
    where = dsn_args["unix_socket"] or shown(listed)
    return f"mysql://{dsn_args['user']}@{where}/{dsn_args['database']}"


def parse_hosts(text: str) -> tuple[Address, ...]:
    """'db1:3306,db2,[::1]:3307' -> ((db1, 3306), (db2, 3306), (::1, 3307)); no host
    at all is the driver's default (a DSN naming a unix_socket). A one-line UserError
    for an empty host in a list or a port that is not one."""
    if not text:
        return ((DEFAULT_HOST, DEFAULT_PORT),)
    return tuple(_address(item) for item in text.split(","))


def _address(item: str) -> Address:
    if item.startswith("["):   # an IPv6 address: [::1]:3307
        host, bracket, rest = item[1:].partition("]")
        if not bracket or rest and not rest.startswith(":"):
            raise UserError(f"bad DSN: {item!r} is not a host: write an IPv6 address "
                            "as [::1]:3306")
        port = rest[1:] if rest else None
    else:
        host, colon, port_text = item.partition(":")
        port = port_text if colon else None
    if not host:
        raise UserError("bad DSN: a host is empty: separate hosts with one comma, "
                        "e.g. mysql://user@db1:3306,db2:3306/jobs")
    if port is None:
        return host.lower(), DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"bad DSN: the port of {host} must be a number from 1 to 65535, "
                        f"got {port!r}")
    return host.lower(), int(port)


def shown(hosts: Sequence[Address]) -> str:
    """The hosts as a DSN writes them."""
    return ",".join(_shown(address) for address in hosts)


def _shown(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
