-- As schema/mysql/0003_error_history.sql: a job keeps its last 10 failed
-- attempts, oldest first, as a JSON array of {"attempt", "at" (UTC ISO 8601),
-- "error"}; NULL until the first failure. last_error (TEXT) needs no change:
-- the store cuts every error to 1000 characters.
ALTER TABLE prefork_jobs ADD COLUMN error_history TEXT NULL;
