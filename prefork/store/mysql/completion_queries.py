"""A handler's own transaction (job.transaction()): the statements of a single
completion, around the statements the handler writes. Autocommit goes off ahead
of COMPLETE, in its round trip (session.py: send_ahead), and the commit ends it:
three round trips a job, the handler's own statement one of them. The mysql
dialect also bounds the session's silence meanwhile, in the same statements."""

# The fence and the lock in one statement, sent first: it changes the row only
# while the lease is ours and live (rowcount 1), and from then on the row is
# locked until the transaction ends, so nobody can expire, extend, recover or
# claim it meanwhile (they all lock the row first, or skip it locked). A
# rollback undoes it with the effect. finished_at is when the effect began; the
# job reads done from the commit on. The token stays on a done row, a late
# cancellation is dropped (see COMPLETE_LOCKED_GROUP).
# It changes nothing with autocommit on: it would commit alone, without the effect,
# should the statement sent ahead of it have failed. (The check is in the token's
# comparison, not a condition of its own: a condition on a variable alone would
# be folded into an impossible WHERE when the doctor explains it, with autocommit on.)
COMPLETE = (
    "UPDATE prefork_jobs FORCE INDEX (PRIMARY) SET status = 'done', lease_until = NULL,"
    " finished_at = UTC_TIMESTAMP(6), cancel_requested_at = NULL, updated_at = UTC_TIMESTAMP(6)"
    " WHERE id = %s AND status = 'reserved' AND lease_token = IF(@@SESSION.autocommit, NULL, %s)"
    " AND lease_until > UTC_TIMESTAMP(6)")

# The mariadb dialect: with autocommit off, COMPLETE opens the transaction. COMMIT
# leaves autocommit off, so that the next job's COMPLETE opens the next one; any
# other statement first turns it back on (there is no transaction to commit then).
AUTOCOMMIT_OFF = "SET SESSION autocommit = 0"
COMMIT = "COMMIT"
AUTOCOMMIT_ON = "SET SESSION autocommit = 1"

# The mysql dialect (MySQL has no idle_transaction_timeout): while a handler's
# transaction is open, the server ends a session silent for this many seconds,
# rolling its transaction back; a worker may rightly be silent for longer while a
# job without a transaction runs. Turning autocommit back on commits the open
# transaction (after a rollback: there is none), as the MySQL 8.0 and 8.4 manuals
# say of autocommit (START TRANSACTION, COMMIT, and ROLLBACK Statements); the
# server's own wait_timeout comes back with it (a client that is not interactive
# starts with it).
BOUND_SILENCE_AND_BEGIN = "SET SESSION wait_timeout = %s, autocommit = 0"
COMMIT_AND_UNBOUND_SILENCE = "SET SESSION autocommit = 1, wait_timeout = @@GLOBAL.wait_timeout"
