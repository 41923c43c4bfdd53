"""The MySQL and MariaDB checks. They run on a store opened as every queue process
opens it, so its connection is a queue session: the same settings, the same
account, the same dialect."""
import time
from datetime import timezone
import pymysql
from pymysql.constants import ER

from ..config import Config
from ..errors import UserError
from ..store.mysql.schema_queries import SCHEMA_VERSIONS
from ..store.mysql.server import MINIMUM, Flavor, Server, check_supported
from ..store.mysql.session import error_code
from ..store.mysql.store import MySQLStore
from . import grants, plans, roundtrip
from .reads import column, rows, scalar
from .topology import topology_checks
from .checks import PLAN_CHECKS, Check, Status, run_check, run_checks, skipped
from .queries import (
    ACCOUNT,
    GRANTS,
    ISOLATION,
    ISOLATION_OLD_NAME,
    REMOVE_SCRATCH_JOB,
    SERVER_UTC_NOW,
    TIME_ZONE,
)

READ_COMMITTED = "READ-COMMITTED"
UTC_ZONES = ("+00:00", "UTC")
SKEW_WARN = 1.0   # seconds: beyond this, clocks are not kept in sync
NEEDS_SCHEMA = (*PLAN_CHECKS, roundtrip.NAME)


def mysql_checks(store: MySQLStore, config: Config, queue: str) -> list[Check]:
    """Every check, in the order an operator fixes things. Those that need the
    queue's tables are skipped when the schema is missing or behind."""
    conn = store.conn
    schema = run_check("schema", lambda: schema_check(store))
    checks = [
        server_check(store.server),
        dialect_check(store.server, store.dialect, config.dialect),
        schema,
        run_check(grants.NAME, lambda: grants.judge(
            column(conn, GRANTS), store.dsn_args["database"], scalar(conn, ACCOUNT))),
        run_check("isolation", lambda: isolation_check(conn)),
        run_check("time zone", lambda: time_zone_check(conn)),
        run_check("clock", lambda: clock_check(conn, config.lease_seconds)),
        *topology_checks(conn, store.server.flavor, config.supervisor_timeout,
                         schema.status is not Status.FAIL),
    ]
    if schema.status is Status.FAIL:
        return checks + [skipped(name, "the schema is not current") for name in NEEDS_SCHEMA]
    checks += run_checks(PLAN_CHECKS, lambda: plans.plan_checks(
        conn, store.server, store.dialect, queue))
    checks.append(run_check(roundtrip.NAME, lambda: roundtrip.round_trip(
        store, queue, config.lease_seconds, lambda job_id: _remove(conn, job_id, queue))))
    return checks


def server_check(server: Server) -> Check:
    """Flavor and version; fail on a server without SKIP LOCKED."""
    try:
        check_supported(server)
    except UserError as exc:
        return Check("server", Status.FAIL, str(exc))
    minimum = ".".join(map(str, MINIMUM[server.flavor]))
    return Check("server", Status.OK, f"{server} ({server.text}); the queue needs "
                 f"{minimum} or later (SKIP LOCKED)")


def dialect_check(server: Server, dialect: Flavor, setting: str) -> Check:
    """The dialect the store speaks (a dialect the server cannot take is refused at
    connect, and reported there)."""
    why = "auto: the server's own" if setting == "auto" else f"dialect = {setting}"
    portable = (", the MySQL 8.0/8.4 dialect on MariaDB, as the test suite runs it"
                if dialect is Flavor.MYSQL and server.flavor is Flavor.MARIADB else "")
    return Check("dialect", Status.OK, f"{dialect.value} ({why}{portable})")


def schema_check(store: MySQLStore) -> Check:
    """Present and current (check_schema's line says to run migrate); a version this
    release does not know means a newer release migrated the database."""
    store.check_schema()
    known = {version for version, _, _ in store.migrations()}
    applied = {row[0] for row in rows(store.conn, SCHEMA_VERSIONS)}
    newer = sorted(applied - known)
    if newer:
        return Check("schema", Status.WARN, f"version {newer[-1]} is applied, which this "
                     f"release does not know: a newer prefork-queue migrated it; upgrade here")
    return Check("schema", Status.OK, f"current (version {max(applied)})")


def isolation_check(conn: pymysql.connections.Connection) -> Check:
    try:
        level = str(scalar(conn, ISOLATION))
    except pymysql.err.OperationalError as exc:
        if error_code(exc) != ER.UNKNOWN_SYSTEM_VARIABLE:
            raise
        level = str(scalar(conn, ISOLATION_OLD_NAME))   # MariaDB before 11.1
    if level == READ_COMMITTED:
        return Check("isolation", Status.OK, "READ-COMMITTED, as the queue's sessions set it "
                     "(no gap locks in SKIP LOCKED scans)")
    return Check("isolation", Status.FAIL, f"a queue session runs at {level}, not "
                 "READ-COMMITTED: claims would take gap locks and wait for each other; "
                 "is a proxy between here and the server dropping session settings?")


def time_zone_check(conn: pymysql.connections.Connection) -> Check:
    zone = str(scalar(conn, TIME_ZONE))
    if zone in UTC_ZONES:
        return Check("time zone", Status.OK, f"{zone}, as the queue's sessions set it")
    return Check("time zone", Status.FAIL, f"a queue session has time zone {zone}, not "
                 "+00:00: NOW() and TIMESTAMP columns in handlers' transactions would not be "
                 "UTC; is a proxy between here and the server dropping session settings?")


def clock_check(conn: pymysql.connections.Connection, lease_seconds: float) -> Check:
    before = time.time()
    server_now = scalar(conn, SERVER_UTC_NOW)
    after = time.time()
    server_time = server_now.replace(tzinfo=timezone.utc).timestamp()
    return judge_skew(server_time - (before + after) / 2, (after - before) / 2, lease_seconds)


def judge_skew(skew: float, margin: float, lease_seconds: float) -> Check:
    """skew: the server's clock minus ours, in seconds, known to within ±margin.

    Leases are measured on the server's clock alone, so no skew breaks the lease
    fence. This host's clock drives its schedules and stamps its logs, while job
    rows (and the times typed for `--at`) follow the server's.
    """
    least = max(0.0, abs(skew) - margin)   # the clocks differ by at least this much
    said = (f"this host's clock is {abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} "
            f"the server's (±{margin:.3f} s)" if least else
            f"this host's clock and the server's agree to within "
            f"{(abs(skew) + margin) * 1000:.1f} ms")
    if least > lease_seconds / 4:
        return Check("clock", Status.FAIL, f"{said}: over a quarter of a lease "
                     f"({lease_seconds / 4:g} s), a clock that is not synchronized at all; "
                     "this host's schedules fire that far off the others', and its logs and "
                     "the job rows disagree by as much; run NTP")
    if least > SKEW_WARN:
        return Check("clock", Status.WARN, f"{said}: leases use the server's clock and are "
                     "safe, but this host's schedules and logs are that far off; run NTP")
    return Check("clock", Status.OK, f"{said}; leases use the server's clock")


def _remove(conn: pymysql.connections.Connection, job_id: int, queue: str) -> bool:
    """Delete the round trip's job; False when the account has no DELETE."""
    try:
        with conn.cursor() as cursor:
            cursor.execute(REMOVE_SCRATCH_JOB, (job_id, queue))
        return True
    except pymysql.err.MySQLError as exc:
        if error_code(exc) == ER.TABLEACCESS_DENIED_ERROR:
            return False
        raise
