"""`prefork-queue doctor`: checks an operator runs against their own database before
going live. checks.py holds the result type and the runner; mysql.py, grants.py and
plans.py the MySQL/MariaDB checks; sqlite.py the SQLite ones; roundtrip.py the
enqueue-claim-complete trip both share. Their SQL is named in queries.py."""
