-- sluice schema, MySQL/MariaDB dialect, version 17: what the owner of a
-- partition's lease holds in its stream cache.
--
-- cache_windows and cache_records: the resident windows of the owner's
-- cache of the partition and the records in them, as it last renewed
-- the lease (the renewal's own statement writes them). 0 until then, and
-- once the lease is acquired anew or released, what every row meant
-- before.
--
-- As in the earlier versions the statement can run again after a start
-- that died part way: the columns are added only when information_schema
-- lacks them (both in one statement, so either both are there or none).
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_partition_leases ADD COLUMN cache_windows INT NOT NULL DEFAULT 0, ADD COLUMN cache_records BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_leases' AND COLUMN_NAME = 'cache_windows');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
