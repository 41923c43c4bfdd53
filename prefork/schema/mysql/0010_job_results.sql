-- Results and failed attempts of every job, not only Django tasks: a handler's
-- return value (JSON) is written in the transaction that marks its job done, and
-- each failed attempt's row names the exception's class and keeps its traceback
-- (the last 3 attempts' only, as error_detail allows). A result is read until
-- expires_at (its completion plus result_ttl); the supervisors clear expired ones
-- through the index. NULL: kept as long as its job (rows written before this
-- version, and failed attempts).
ALTER TABLE prefork_task_results ADD COLUMN expires_at DATETIME(6) NULL,
  ADD KEY ix_prefork_task_results_expiry (expires_at);
