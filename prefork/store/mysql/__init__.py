"""The MySQL 8 / MariaDB dialect of the store: connections and session settings, the schema,
the job life cycle, the operator tables, the bench's SQL.
"""
