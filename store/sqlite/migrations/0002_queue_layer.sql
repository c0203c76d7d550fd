-- sluice schema, SQLite dialect, version 2: what the queue layer stores.

-- The queue layer's own settings of an entity, as JSON.
ALTER TABLE sluice_queues ADD COLUMN attributes TEXT;

-- System properties (correlation id, subject, reply-to, ...) as a JSON
-- object, and whether a message was deferred: a deferred message whose
-- lease ends, or that is abandoned, goes back to state 3, not 0.
ALTER TABLE sluice_messages ADD COLUMN headers TEXT;
ALTER TABLE sluice_messages ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sluice_dead_letters ADD COLUMN headers TEXT;
