-- Errors an operator can act on: a failed attempt keeps the exception's class
-- and message (credentials masked, cut to 1000 characters; the error_detail
-- setting can keep the class only), and a job keeps its last failed attempts.

-- VARCHAR(500) -> (1000) keeps two length bytes: changed in place, no copy.
ALTER TABLE prefork_jobs MODIFY last_error VARCHAR(1000) NULL;

-- The last 10 failed attempts, oldest first, as a JSON array of
-- {"attempt", "at" (UTC ISO 8601), "error"}; NULL until the first failure.
-- Written only on the failure path, under the row's lock, never by a claim or
-- a completion. Added last, so MySQL 8 and MariaDB add it without a copy.
ALTER TABLE prefork_jobs ADD COLUMN error_history MEDIUMTEXT NULL;
