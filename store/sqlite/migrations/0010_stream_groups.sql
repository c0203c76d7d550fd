-- sluice schema, SQLite dialect, version 10: stream groups.
--
-- The nodes of a tenant form groups ('' is the default): the nodes of a
-- group handle the same consumers and share every partition among
-- themselves, so a partition has a lease, with its own owner and epoch,
-- in each group. (The network API runs each remote consumer in a group
-- of its own, beside the application's processors.) The checkpoint stays
-- one per partition, never past any subscription's stored position.

ALTER TABLE sluice_nodes ADD COLUMN node_group TEXT NOT NULL DEFAULT '';
-- The consumers a node handles, comma-separated: two groups must not
-- handle one consumer, and operators see who handles what.
ALTER TABLE sluice_nodes ADD COLUMN consumers TEXT NOT NULL DEFAULT '';

-- SQLite cannot change a primary key: the lease table is built again.
CREATE TABLE sluice_partition_leases_v10 (
    service      TEXT    NOT NULL,
    provider     TEXT    NOT NULL,
    node_group   TEXT    NOT NULL,
    partition    INTEGER NOT NULL,
    owner        TEXT    NOT NULL,
    epoch        INTEGER NOT NULL,
    lease_until  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (service, provider, node_group, partition)
) WITHOUT ROWID;

INSERT INTO sluice_partition_leases_v10 (service, provider, node_group, partition, owner, epoch, lease_until, updated_at)
SELECT service, provider, '', partition, owner, epoch, lease_until, updated_at FROM sluice_partition_leases;

DROP TABLE sluice_partition_leases;
ALTER TABLE sluice_partition_leases_v10 RENAME TO sluice_partition_leases;
