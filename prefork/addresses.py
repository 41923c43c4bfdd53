"""HOST:PORT settings (metrics_address, dashboard_bind, wakeup_bind): one parser and
one loopback test for all of them, so they accept and refuse the same values."""
import ipaddress
from urllib.parse import urlsplit

from .errors import UserError


def parse_host_port(text: str, setting: str, example: str, port_zero: bool = False) -> tuple[str, int]:
    """(host, port) of HOST:PORT or [IPv6]:PORT (port 0, "any free one", only when
    port_zero); a one-line UserError naming the setting otherwise."""
    problem = f"invalid {setting} {text!r}: expected HOST:PORT, e.g. {example}"
    try:
        parts = urlsplit("//" + text.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        raise UserError(problem) from None
    if not host or port is None or (port == 0 and not port_zero) or parts.path or \
            parts.query or parts.fragment or parts.username:
        raise UserError(problem)
    return host, port


def is_loopback(host: str) -> bool:
    """Whether a listening host is this machine's loopback (a host name other than
    localhost may resolve to anything: not loopback)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
