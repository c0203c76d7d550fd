-- sluice schema, MySQL/MariaDB dialect, version 8: stream nodes and
-- partition leases.

-- The nodes of a tenant's stream cluster: each process that pulls
-- partitions registers under an id of its own and heartbeats; a node
-- whose heartbeat is older than its own failure timeout (timeout_ms), by
-- the database's clock, is dead.
CREATE TABLE IF NOT EXISTS sluice_nodes (
    service       VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider      VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    id            VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    address       VARCHAR(260) NOT NULL,
    started_at    BIGINT   NOT NULL,
    heartbeat_at  BIGINT   NOT NULL,
    timeout_ms    BIGINT  NOT NULL,
    PRIMARY KEY (service, provider, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A partition's lease: its owner holds it until lease_until (ms, by the
-- database's clock); 0 when released or never leased. (MySQL 8 has no
-- ADD COLUMN IF NOT EXISTS: the statement is chosen from
-- information_schema, as in version 2, so that a start that died part
-- way can run the file again.)
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_partition_owners ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_owners'
      AND COLUMN_NAME = 'lease_until');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
