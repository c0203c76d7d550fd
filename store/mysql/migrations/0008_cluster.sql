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
-- database's clock); 0 when released or never leased.
ALTER TABLE sluice_partition_owners ADD COLUMN IF NOT EXISTS lease_until BIGINT NOT NULL DEFAULT 0;
