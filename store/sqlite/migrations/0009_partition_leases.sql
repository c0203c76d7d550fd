-- sluice schema, SQLite dialect, version 9: partition leases in a table
-- of their own.
--
-- Version 8 kept a partition's lease on its owner row, which is also the
-- partition's retention lock; the server dialects split them so that the
-- data path never holds up lease renewals, and SQLite keeps the same
-- tables.

-- A partition's lease: its owner, the epoch (one more at each
-- acquisition; writes fenced by an older one are refused), and until when
-- it holds (ms; 0 when released or never leased).
CREATE TABLE sluice_partition_leases (
    service      TEXT    NOT NULL,
    provider     TEXT    NOT NULL,
    partition    INTEGER NOT NULL,
    owner        TEXT    NOT NULL,
    epoch        INTEGER NOT NULL,
    lease_until  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition)
) WITHOUT ROWID;

-- A partition's checkpoint: every subscription is done with the
-- partition's records at or below it.
CREATE TABLE sluice_partition_checkpoints (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    checkpoint  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition)
) WITHOUT ROWID;

INSERT INTO sluice_partition_leases (service, provider, partition, owner, epoch, lease_until, updated_at)
SELECT service, provider, partition, owner, epoch, lease_until, updated_at FROM sluice_partition_owners;

INSERT INTO sluice_partition_checkpoints (service, provider, partition, checkpoint, updated_at)
SELECT service, provider, partition, checkpoint, updated_at FROM sluice_partition_owners;

DROP TABLE sluice_partition_owners;
