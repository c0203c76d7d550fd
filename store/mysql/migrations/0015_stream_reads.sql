-- sluice schema, MySQL/MariaDB dialect, version 15: one stream's records
-- read without the rest of its partition.
--
-- A stream's subscription that rewinds (a replay from the start or from a
-- position, a cleared fault, a restart behind the cache) reads only that
-- stream's records (ReadStreamRecords). This index puts each stream's
-- records of a partition together, in position order, so that the read
-- costs O(log n + records returned) however many records the partition's
-- other streams hold. Every append writes one more index entry a record;
-- docs/benchmarks.md ("Stream index") gives what that costs.
--
-- stream_key is VARCHAR(1024) utf8mb4, up to 4,096 bytes: with the other
-- columns, more than InnoDB's 3,072 bytes a key. The index holds the
-- key's first 512 characters (2,048 bytes; 2,528 with the other columns),
-- a prefix rather than a stored hash column: no column to add and fill on
-- a large table, no hash to compute on each append, and an entry only as
-- long as the key (VARCHAR prefixes are not padded). Records of keys that
-- share their first 512 characters share a range, and the read compares
-- the full key on the rows it finds there; shorter keys cost nothing.
-- The prefix still serves the order: the equality on namespace and the
-- key's prefix fixes every column before position, so MariaDB reads the
-- range in position order, with no filesort (EXPLAIN: "range" on
-- sluice_records_stream, "Using index condition; Using where"; the
-- TestReadStreamCost of store/mysql checks it).
--
-- As in the earlier versions the statement can run again after a start
-- that died part way: the index is added only when information_schema
-- lacks it.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_records ADD INDEX sluice_records_stream (service, provider, `partition`, namespace, stream_key(512), position)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_records' AND INDEX_NAME = 'sluice_records_stream');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
