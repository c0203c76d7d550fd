-- sluice schema, PostgreSQL dialect, version 2: what the queue layer stores.
-- (Adding a column with a constant default rewrites no rows.)

-- The queue layer's own settings of an entity, as JSON.
ALTER TABLE sluice_queues ADD COLUMN attributes TEXT;

-- Queues are listed in byte order of their names, as the other dialects
-- list them, whatever the database's collation: ListQueues pages through
-- this index (one row per queue, and no column that leases and enqueues
-- update, so it costs them nothing).
CREATE INDEX sluice_queues_list ON sluice_queues (service, provider, name COLLATE "C");

-- System properties (correlation id, subject, reply-to, ...) as a JSON
-- object, and whether a message was deferred: a deferred message whose
-- lease ends, or that is abandoned, goes back to state 3, not 0.
ALTER TABLE sluice_messages ADD COLUMN headers TEXT;
ALTER TABLE sluice_messages ADD COLUMN deferred SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE sluice_dead_letters ADD COLUMN headers TEXT;
