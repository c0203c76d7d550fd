-- sluice schema, PostgreSQL dialect, version 10: stream groups.
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

ALTER TABLE sluice_partition_leases ADD COLUMN node_group TEXT NOT NULL DEFAULT '';
ALTER TABLE sluice_partition_leases DROP CONSTRAINT sluice_partition_leases_pkey;
ALTER TABLE sluice_partition_leases ADD PRIMARY KEY (service, provider, node_group, partition);
