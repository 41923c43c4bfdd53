"""The MySQL store's reads for the workflow pages (store/workflow_views.py), the same
in both dialects; a part of MySQLStore. Statements are named in
workflow_view_queries.py."""
from typing import Any

import pymysql

from ..workflow_views import WorkflowReads
from .session import MySQLSession
from .workflow_view_queries import SQL


class MySQLWorkflowViews(WorkflowReads, MySQLSession):
    view_sql = SQL

    def view_rows(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
