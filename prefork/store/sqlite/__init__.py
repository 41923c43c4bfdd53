"""The SQLite dialect of the store: the file and its connections, the schema, the job life
cycle, the operator tables, the bench's SQL.
"""
