-- sluice schema, MySQL/MariaDB dialect, version 16: a hard ceiling on how
-- long a namespace's records stay, and a retention for parked events.
--
-- expiry_ms: a record older than this goes whether or not every
-- subscription of its namespace has read it (0: no ceiling). parked_ms:
-- the namespace's parked events go once parked this long (0: kept until
-- replayed or deleted). Both default to 0, what every row meant before.
--
-- As in the earlier versions each statement can run again after a start
-- that died part way: a column or index is added only when
-- information_schema lacks it.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_stream_retention ADD COLUMN expiry_ms BIGINT NOT NULL DEFAULT 0, ADD COLUMN parked_ms BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_retention' AND COLUMN_NAME = 'expiry_ms');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

-- Trims delete a partition's parked events of a namespace by age: this
-- index finds them without reading the others.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_stream_parked ADD INDEX sluice_stream_parked_age (service, provider, `partition`, namespace, parked_at)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_parked' AND INDEX_NAME = 'sluice_stream_parked_age');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
