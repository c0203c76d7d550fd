-- sluice schema, PostgreSQL dialect, version 5: receiving from the
-- dead-letter queue. A dead letter received in peek-lock mode is locked
-- under a token until locked_until (0: free).
-- (Adding a column with a constant default rewrites no rows.)
ALTER TABLE sluice_dead_letters ADD COLUMN lock_token BIGINT;
ALTER TABLE sluice_dead_letters ADD COLUMN locked_until BIGINT NOT NULL DEFAULT 0;
