-- sluice schema, PostgreSQL dialect, version 17: what the owner of a
-- partition's lease holds in its stream cache.
--
-- cache_windows and cache_records: the resident windows of the owner's
-- cache of the partition and the records in them, as it last renewed
-- the lease (the renewal's own statement writes them). 0 until then, and
-- once the lease is acquired anew or released, what every row meant
-- before.
ALTER TABLE sluice_partition_leases
    ADD COLUMN cache_windows INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN cache_records BIGINT NOT NULL DEFAULT 0;
