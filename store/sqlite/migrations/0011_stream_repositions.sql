-- sluice schema, SQLite dialect, version 11: stream subscription
-- repositions.
--
-- An operator may move a subscription to a position, to the oldest
-- record retention kept, or to the head (past a retention gap, say).
-- repositions counts those moves: a save of progress writes a
-- subscription's position only under the count its owner knows, so that
-- one computed before a reposition never moves it back. repositioned
-- records the last one (JSON: kind, by, at, from and to per partition).

ALTER TABLE sluice_stream_subscriptions ADD COLUMN repositions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sluice_stream_subscriptions ADD COLUMN repositioned TEXT;
