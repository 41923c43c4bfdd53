"""The SQLite store's reads for the workflow pages (store/workflow_views.py); a part
of SQLiteStore. Statements are named in workflow_view_queries.py; times are stored
text (file.py)."""
from datetime import datetime
from typing import Any

from ..workflow_views import WorkflowReads
from .file import stamp
from .session import SQLiteSession
from .workflow_view_queries import SQL


class SQLiteWorkflowViews(WorkflowReads, SQLiteSession):
    view_sql = SQL

    def view_rows(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._read_dicts(sql, {name: stamp(value) if isinstance(value, datetime)
                                      else value for name, value in params.items()})
