"""Which server a mysql:// DSN reached: MariaDB or MySQL, its version, whether
the queue can run on it, and which SQL dialect `dialect = auto` picks for it."""
import re
from dataclasses import dataclass
from enum import StrEnum

from ...errors import UserError


class Flavor(StrEnum):
    MARIADB = "mariadb"
    MYSQL = "mysql"


# The first releases with `SELECT ... FOR UPDATE SKIP LOCKED`, which the claim needs.
MINIMUM = {Flavor.MYSQL: (8, 0, 1), Flavor.MARIADB: (10, 6, 0)}
# MariaDB may announce itself behind a "5.5.5-" prefix (kept for old replication
# clients); the real version follows it.
_REPLICATION_PREFIX = "5.5.5-"
_NUMBERS = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Server:
    flavor: Flavor
    version: tuple[int, int, int]
    text: str   # the server's own words, e.g. "10.11.19-MariaDB-0+deb12u1"

    def __str__(self) -> str:
        flavor = "MariaDB" if self.flavor is Flavor.MARIADB else "MySQL"
        return f"{flavor} {'.'.join(map(str, self.version))}"


def parse_version(text: str) -> Server:
    """The server from `SELECT VERSION()` (or the handshake's version string)."""
    flavor = Flavor.MARIADB if "mariadb" in text.lower() else Flavor.MYSQL
    numbers = text.removeprefix(_REPLICATION_PREFIX) if flavor is Flavor.MARIADB else text
    match = _NUMBERS.match(numbers.strip())
    if match is None:
        raise UserError(f"cannot read the database server's version from {text!r}")
    major, minor, patch = (int(part or 0) for part in match.groups())
    return Server(flavor, (major, minor, patch), text)


def check_supported(server: Server) -> None:
    """Refuse, in one line, a server without SKIP LOCKED."""
    minimum = MINIMUM[server.flavor]
    if server.version < minimum:
        name = "MariaDB" if server.flavor is Flavor.MARIADB else "MySQL"
        raise UserError(f"{server} ({server.text}) is too old for prefork-queue: it needs "
                        f"{name} {'.'.join(map(str, minimum))} or later (SKIP LOCKED)")


def dialect_for(server: Server, setting: str) -> Flavor:
    """The dialect to speak: the one the `dialect` setting names, or for `auto`
    the server's own. (The mysql dialect also runs on MariaDB: that is how it is
    tested here; the mariadb dialect is refused on MySQL, whose parser lacks
    what it uses.)"""
    if setting == "auto":
        return server.flavor
    chosen = Flavor(setting)
    if chosen is Flavor.MARIADB and server.flavor is Flavor.MYSQL:
        raise UserError(f"dialect = mariadb cannot run on {server}: set dialect = mysql "
                        "or auto")
    return chosen
