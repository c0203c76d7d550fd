-- sluice schema, SQLite dialect, version 5: receiving from the dead-letter
-- queue. A dead letter received in peek-lock mode is locked under a token
-- until locked_until (0: free).
ALTER TABLE sluice_dead_letters ADD COLUMN lock_token INTEGER;
ALTER TABLE sluice_dead_letters ADD COLUMN locked_until INTEGER NOT NULL DEFAULT 0;
