"""A handler's own transaction (job.transaction()): the statements of a single
completion, around the statements the handler writes. Both dialects fence and
lock with COMPLETE; the mysql dialect opens and ends the transaction with the
two SET statements below instead of BEGIN and COMMIT."""

# The fence and the lock in one statement, sent first: it changes the row only
# while the lease is ours and live (rowcount 1), and from then on the row is
# locked until the transaction ends, so nobody can expire, extend, recover or
# claim it meanwhile (they all lock the row first, or skip it locked). A
# rollback undoes it with the effect. finished_at is when the effect began; the
# job reads done from the commit on. The token stays on a done row, a late
# cancellation is dropped (see COMPLETE_LOCKED_GROUP).
COMPLETE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_until = NULL,"
    " finished_at = UTC_TIMESTAMP(6), cancel_requested_at = NULL, updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = %s"
    " AND lease_until > UTC_TIMESTAMP(6)")

# The mysql dialect (MySQL has no idle_transaction_timeout): while a handler's
# transaction is open, the server ends a session silent for this many seconds,
# rolling its transaction back; a worker may rightly be silent for longer while a
# job without a transaction runs. With autocommit off, COMPLETE opens the
# transaction: no BEGIN of its own.
BOUND_SILENCE_AND_BEGIN = "SET SESSION wait_timeout = %s, autocommit = 0"

# Turning autocommit back on commits the open transaction (after a rollback: there
# is none), as the MySQL 8.0 and 8.4 manuals say of autocommit (START TRANSACTION,
# COMMIT, and ROLLBACK Statements); the server's own wait_timeout comes back (a
# client that is not interactive starts with it), all in the round trip of the COMMIT.
COMMIT_AND_UNBOUND_SILENCE = "SET SESSION autocommit = 1, wait_timeout = @@GLOBAL.wait_timeout"
