-- sluice schema, SQLite dialect, version 8: stream nodes and partition
-- leases.

-- The nodes of a tenant's stream cluster: each process that pulls
-- partitions registers under an id of its own and heartbeats; a node
-- whose heartbeat is older than its own failure timeout (timeout_ms) is
-- dead. (On SQLite one node at a time pulls a tenant's partitions.)
CREATE TABLE sluice_nodes (
    service       TEXT    NOT NULL,
    provider      TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    address       TEXT    NOT NULL,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    timeout_ms    INTEGER NOT NULL,
    PRIMARY KEY (service, provider, id)
) WITHOUT ROWID;

-- A partition's lease: its owner holds it until lease_until (ms); 0 when
-- released or never leased.
ALTER TABLE sluice_partition_owners ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
