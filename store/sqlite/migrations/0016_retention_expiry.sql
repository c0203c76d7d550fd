-- sluice schema, SQLite dialect, version 16: a hard ceiling on how long a
-- namespace's records stay, and a retention for parked events.
--
-- expiry_ms: a record older than this goes whether or not every
-- subscription of its namespace has read it (0: no ceiling). parked_ms:
-- the namespace's parked events go once parked this long (0: kept until
-- replayed or deleted). Both default to 0, what every row meant before.
ALTER TABLE sluice_stream_retention ADD COLUMN expiry_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sluice_stream_retention ADD COLUMN parked_ms INTEGER NOT NULL DEFAULT 0;

-- Trims delete a partition's parked events of a namespace by age: this
-- index finds them without reading the others.
CREATE INDEX sluice_stream_parked_age
    ON sluice_stream_parked (service, provider, partition, namespace, parked_at);
