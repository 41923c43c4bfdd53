"""The account's privileges against what `prefork-queue grants` prints: read from
SHOW GRANTS's lines, compared per queue table. Missing ones fail the check; more
than a worker needs (ALL PRIVILEGES, DELETE, DDL, GRANT OPTION, a whole
database or every database) is a warning: least privilege."""
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..store.mysql.schema import RULES_TABLE, WORKER_TABLES
from .checks import Check, Status

NAME = "privileges"
ALL = "ALL PRIVILEGES"
USAGE = "USAGE"   # "no privileges"
WORKER_PRIVILEGES = frozenset({"SELECT", "INSERT", "UPDATE"})
# What `grants` gives a worker: read, insert and update the queue tables, also
# delete the published limits (publish_limits replaces them), and read the
# schema's versions (to check the schema is current).
NEEDED: dict[str, frozenset[str]] = {
    **{table: WORKER_PRIVILEGES for table in WORKER_TABLES},
    RULES_TABLE: WORKER_PRIVILEGES | {"DELETE"},
    "prefork_schema_migrations": frozenset({"SELECT"}),
}

_QUOTED = r"`(?:[^`]|``)*`|\"(?:[^\"]|\"\")*\""
_OBJECT_NAME = rf"\*|{_QUOTED}|[^\s.`\"]+"
# GRANT <privileges> ON [TABLE] <database>.<table> TO ...; routines and proxies
# (ON FUNCTION ..., ON PROCEDURE ..., PROXY ON ''@'%') are no table's.
_PRIVILEGE_GRANT = re.compile(
    rf"GRANT\s+(?P<privileges>.+?)\s+ON\s+(?:TABLE\s+)?"
    rf"(?P<database>{_OBJECT_NAME})\.(?P<table>{_OBJECT_NAME})\s+TO\s", re.S | re.I)
# GRANT `role` TO `user`@`host` (MariaDB and MySQL 8 roles): no ON.
_ROLE = rf"(?:{_QUOTED}|[^\s,]+)"
_ROLE_GRANT = re.compile(rf"GRANT\s+(?P<roles>{_ROLE}(?:\s*,\s*{_ROLE})*)\s+TO\s", re.S | re.I)
_ROUTINE_OR_PROXY = re.compile(r"GRANT\s+.+?\s+ON\s+(FUNCTION|PROCEDURE|PACKAGE)\b|GRANT\s+PROXY\s",
                               re.S | re.I)


@dataclass(frozen=True)
class Grant:
    """One GRANT line on tables: its table-wide privileges (ALL PRIVILEGES kept as
    that word) and where they apply. database/table None: every one (`*`)."""
    privileges: frozenset[str]
    database: str | None
    table: str | None
    grant_option: bool

    def covers(self, database: str, table: str) -> bool:
        return ((self.database is None or _like(self.database, database))
                and (self.table is None or self.table == table))

    def where(self) -> str:
        database = "*" if self.database is None else f"`{self.database}`"
        return f"{database}.{'*' if self.table is None else self.table}"


@dataclass(frozen=True)
class Grants:
    """What SHOW GRANTS said: the table grants, the roles granted (not expanded),
    and the lines that were neither (counted, never shown: they may hold a
    password hash)."""
    grants: tuple[Grant, ...]
    roles: tuple[str, ...]
    unread: int


def parse_grants(lines: Iterable[str]) -> Grants:
    grants, roles, unread = [], [], 0
    for line in lines:
        text = line.strip()
        if _ROUTINE_OR_PROXY.match(text):
            continue
        privilege_grant = _PRIVILEGE_GRANT.match(text)
        role_grant = _ROLE_GRANT.match(text)
        if privilege_grant:
            grants.append(_grant(privilege_grant, text))
        elif role_grant:
            roles += [role.strip() for role in _split_list(role_grant["roles"])]
        elif not text.upper().startswith("SET DEFAULT ROLE"):
            unread += 1
    return Grants(tuple(grants), tuple(roles), unread)


def _grant(match: re.Match[str], text: str) -> Grant:
    # Column grants, "UPDATE (`state`)", give no table-wide privilege: left out.
    table_wide = {word.upper() for word in (" ".join(part.split())
                                            for part in _split_list(match["privileges"]))
                  if "(" not in word}
    if "ALL" in table_wide:
        table_wide = (table_wide - {"ALL"}) | {ALL}
    database, table = (None if name == "*" else _unquote(name)
                       for name in (match["database"], match["table"]))
    grant_option = bool(re.search(r"\bWITH\s+GRANT\s+OPTION\b", text, re.I))
    return Grant(frozenset(table_wide), database, table, grant_option)


def _split_list(text: str) -> list[str]:
    """Split on the commas outside parentheses and quotes."""
    parts, depth, quote, current = [], 0, "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "`\"":
            quote = char
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    return parts + [current]


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`\"":
        return name[1:-1].replace(name[0] * 2, name[0])
    return name


def _like(pattern: str, name: str) -> bool:
    """A database grant's name is a LIKE pattern: _ and % are wildcards, \\_ and \\% not."""
    regex = "".join(".*" if part == "%" else "." if part == "_" else re.escape(part[-1])
                    for part in re.findall(r"\\.|.", pattern, re.S))
    return re.fullmatch(regex, name, re.S) is not None


def held(grants: Sequence[Grant], database: str, table: str) -> frozenset[str]:
    """The table-wide privileges the grants give on one table (ALL PRIVILEGES: all)."""
    found: set[str] = set()
    for grant in grants:
        if grant.covers(database, table):
            found |= grant.privileges
    return frozenset(found)


def missing(grants: Sequence[Grant], database: str) -> dict[str, list[str]]:
    """{table: [privilege]} of what a worker needs and the grants do not give."""
    result = {}
    for table, needed in NEEDED.items():
        privileges = held(grants, database, table)
        lacking = [] if ALL in privileges else sorted(needed - privileges)
        if lacking:
            result[table] = lacking
    return result


def beyond_need(grants: Sequence[Grant], database: str) -> list[str]:
    """The grants that give more than a worker needs, as "PRIVILEGES ON where".
    Grants on other tables are the application's (job.transaction() writes there)."""
    extra = []
    for grant in grants:
        privileges = grant.privileges - {USAGE}
        if grant.table is None and grant.covers(database, "any table"):
            more = privileges   # a whole database (ours) or every database
        elif grant.table in NEEDED and grant.covers(database, grant.table):
            more = privileges if ALL in privileges else privileges - NEEDED[grant.table]
        else:
            continue
        if more or grant.grant_option:
            extra.append(f"{_listed(more) or USAGE} ON {grant.where()}"
                         + (" WITH GRANT OPTION" if grant.grant_option else ""))
    return extra


def _listed(privileges: Iterable[str], shown: int = 4) -> str:
    """A few privileges by name (MySQL 8 lists some forty for an administrator)."""
    names = sorted(privileges)
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown - 1])} and {len(names) - shown + 1} more"


def judge(lines: Iterable[str], database: str, account: str) -> Check:
    """The privileges check from SHOW GRANTS's lines."""
    grants = parse_grants(lines)
    lacking = missing(grants.grants, database)
    if lacking:
        named = "; ".join(f"{', '.join(privileges)} on {table}"
                          for table, privileges in lacking.items())
        if grants.roles:
            return Check(NAME, Status.WARN, f"{account} lacks {named}, unless its roles "
                         f"({', '.join(grants.roles)}) give them: roles are not read here")
        return Check(NAME, Status.FAIL, f"{account} lacks {named}: run what "
                     "`prefork-queue grants` prints, as an administrator")
    extra = beyond_need(grants.grants, database)
    if extra:
        return Check(NAME, Status.WARN, f"{account} has more than a worker needs: "
                     f"{'; '.join(extra)} (least privilege: what `prefork-queue grants` prints; "
                     "keep such an account for migrate, prune and discard)")
    unread = f" ({grants.unread} grant lines not read)" if grants.unread else ""
    return Check(NAME, Status.OK, f"{account} has what `prefork-queue grants` prints and no "
                 f"more on the queue's tables{unread}")
