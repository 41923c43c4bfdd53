"""Reading a MySQL or MariaDB answer the way the doctor's checks want it."""
from typing import Any, Sequence

import pymysql


def rows(conn: pymysql.connections.Connection, sql: str,
         args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql, args or None)
        return list(cursor.fetchall())


def column(conn: pymysql.connections.Connection, sql: str) -> list[str]:
    return [str(row[0]) for row in rows(conn, sql)]


def scalar(conn: pymysql.connections.Connection, sql: str) -> Any:
    return rows(conn, sql)[0][0]


def named_values(conn: pymysql.connections.Connection, sql: str) -> dict[str, str]:
    """SHOW VARIABLES or SHOW STATUS as {name: value}."""
    return {str(name): "" if value is None else str(value) for name, value in rows(conn, sql)}
