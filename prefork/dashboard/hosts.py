"""The host names the dashboard answers to. A request whose Host header names any
other is refused before anything is read: a web page whose own name its DNS now
points at 127.0.0.1 (DNS rebinding) sends its own name as the Host, so it cannot
read a loopback dashboard, nor pass the Origin check of a POST by making Origin and
Host agree."""
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from ..addresses import is_loopback, parse_host_port
from ..errors import UserError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
EVERY_ADDRESS = ("0.0.0.0", "::")   # a bind on these is reachable on loopback too
# A host name, an IPv4 address or a bracketed IPv6 one, and an optional port.
HOST_HEADER = re.compile(r"([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]{1,5})?", re.IGNORECASE)
NAME = re.compile(r"\.?([a-z0-9-]+\.)*[a-z0-9-]+\.?|[0-9a-f:.]*:[0-9a-f:.]*", re.IGNORECASE)


def parse_bind(text: str) -> tuple[str, int]:
    """"127.0.0.1:8187", "[::1]:8187", "localhost:0" -> (host, port)."""
    return parse_host_port(text, "dashboard_bind", "127.0.0.1:8187", port_zero=True)


class ServedNames:
    """The bind address, the loopback names when it listens on loopback, and the names
    of dashboard_allowed_hosts (".example.com": example.com and every name under it).
    Ports are not compared: a proxy may forward from another port."""

    def __init__(self, bind_host: str, allowed: Sequence[str]) -> None:
        host = bind_host.lower()
        names = {host} if host not in EVERY_ADDRESS else set()
        if host in EVERY_ADDRESS or is_loopback(host):
            names.update(LOOPBACK_NAMES)
        self.suffixes: list[str] = []
        for entry in allowed:
            name = _setting_name(entry)
            if name.startswith("."):
                self.suffixes.append(name)
                names.add(name[1:])
            else:
                names.add(name)
        self.names = frozenset(names)

    def serves(self, host_header: str) -> bool:
        name = host_name(host_header)
        if name is None:
            return False
        return name in self.names or any(name.endswith(suffix) for suffix in self.suffixes)


def host_name(host_header: str) -> str | None:
    """The host of a Host header, lower case, without port, brackets or a final dot;
    None when it is not a host (empty, spaces, a user name, a path)."""
    if not HOST_HEADER.fullmatch(host_header):
        return None
    try:
        name = urlsplit("//" + host_header).hostname or ""
    except ValueError:   # brackets around what is no IPv6 address
        return None
    return name.rstrip(".") or None


def _setting_name(entry: str) -> str:
    name = entry.strip().lower().strip("[]").rstrip(".")
    if not name or not NAME.fullmatch(name):
        raise UserError(f"invalid dashboard_allowed_hosts entry {entry!r}: expected a host "
                        f"name without port, e.g. queue.example.com or .example.com")
    return name
