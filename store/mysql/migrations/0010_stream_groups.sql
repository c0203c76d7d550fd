-- sluice schema, MySQL/MariaDB dialect, version 10: stream groups.
--
-- The nodes of a tenant form groups ('' is the default): the nodes of a
-- group handle the same consumers and share every partition among
-- themselves, so a partition has a lease, with its own owner and epoch,
-- in each group. (The network API runs each remote consumer in a group
-- of its own, beside the application's processors.) The checkpoint stays
-- one per partition, never past any subscription's stored position.
--
-- As in the earlier versions, each statement is chosen from
-- information_schema so that a start that died part way can run the
-- file again (MySQL 8 has no ADD COLUMN IF NOT EXISTS).

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_nodes ADD COLUMN node_group VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''''',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_nodes' AND COLUMN_NAME = 'node_group');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

-- The consumers a node handles, comma-separated: two groups must not
-- handle one consumer, and operators see who handles what.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_nodes ADD COLUMN consumers MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT ''''',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_nodes' AND COLUMN_NAME = 'consumers');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_partition_leases ADD COLUMN node_group VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '''' AFTER provider',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_leases' AND COLUMN_NAME = 'node_group');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_partition_leases DROP PRIMARY KEY, ADD PRIMARY KEY (service, provider, node_group, `partition`)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_leases'
      AND INDEX_NAME = 'PRIMARY' AND COLUMN_NAME = 'node_group');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
