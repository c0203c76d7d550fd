-- sluice schema, PostgreSQL dialect, version 9: partition leases in a
-- table of their own.
--
-- Version 8 kept a partition's lease on its owner row, which is also the
-- retention lock that subscription creation, saves and trims hold until
-- they commit: a client paused inside one of those transactions held up
-- the lease renewals of every node. Now the lease (owner, epoch, end)
-- lives in sluice_partition_leases, which only the balancer and the
-- writes it fences lock, and the checkpoint in
-- sluice_partition_checkpoints, which the data path locks.

-- A partition's lease: its owner, the epoch (one more at each
-- acquisition; writes fenced by an older one are refused), and until when
-- it holds (ms, by the database's clock; 0 when released or never
-- leased). A save, a park or a fault under an epoch locks the row until
-- it commits, so that no acquisition lands in between.
CREATE TABLE sluice_partition_leases (
    service      TEXT     NOT NULL,
    provider     TEXT     NOT NULL,
    partition    INTEGER  NOT NULL,
    owner        TEXT     NOT NULL,
    epoch        BIGINT   NOT NULL,
    lease_until  BIGINT   NOT NULL,
    updated_at   BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, partition)
);

-- A partition's checkpoint: every subscription is done with the
-- partition's records at or below it. The row is also the partition's
-- retention lock: creating a subscription, saving progress and trimming
-- take it (FOR UPDATE, held until commit).
CREATE TABLE sluice_partition_checkpoints (
    service     TEXT     NOT NULL,
    provider    TEXT     NOT NULL,
    partition   INTEGER  NOT NULL,
    checkpoint  BIGINT   NOT NULL,
    updated_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, partition)
);

INSERT INTO sluice_partition_leases (service, provider, partition, owner, epoch, lease_until, updated_at)
SELECT service, provider, partition, owner, epoch, lease_until, updated_at FROM sluice_partition_owners;

INSERT INTO sluice_partition_checkpoints (service, provider, partition, checkpoint, updated_at)
SELECT service, provider, partition, checkpoint, updated_at FROM sluice_partition_owners;

DROP TABLE sluice_partition_owners;
