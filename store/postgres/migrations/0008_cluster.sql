-- sluice schema, PostgreSQL dialect, version 8: stream nodes and
-- partition leases.

-- The nodes of a tenant's stream cluster: each process that pulls
-- partitions registers under an id of its own and heartbeats; a node
-- whose heartbeat is older than its own failure timeout (timeout_ms), by
-- the database's clock, is dead.
CREATE TABLE sluice_nodes (
    service       TEXT    NOT NULL,
    provider      TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    address       TEXT    NOT NULL,
    started_at    BIGINT  NOT NULL,
    heartbeat_at  BIGINT  NOT NULL,
    timeout_ms    BIGINT  NOT NULL,
    PRIMARY KEY (service, provider, id)
);

-- A partition's lease: its owner holds it until lease_until (ms, by the
-- database's clock); 0 when released or never leased.
ALTER TABLE sluice_partition_owners ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
