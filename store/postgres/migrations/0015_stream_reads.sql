-- sluice schema, PostgreSQL dialect, version 15: one stream's records read
-- without the rest of its partition.
--
-- A stream's subscription that rewinds (a replay from the start or from a
-- position, a cleared fault, a restart behind the cache) reads only that
-- stream's records (ReadStreamRecords). This index puts each stream's
-- records of a partition together, in position order, so that the read
-- costs O(log n + records returned) however many records the partition's
-- other streams hold. Every append writes one more index entry a record;
-- docs/benchmarks.md ("Stream index") gives what that costs.
--
-- An entry holds at most 100 + 100 + 260 + 1024 bytes of names and key
-- (the limits of store.Validate), within a B-tree entry's 2,704 bytes.
-- The build holds off appends (not reads) while it runs, which on a large
-- sluice_records is worth planning for.
CREATE INDEX sluice_records_stream
    ON sluice_records (service, provider, partition, namespace, stream_key, position);
