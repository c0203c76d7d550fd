-- sluice schema, MySQL/MariaDB dialect, version 9: partition leases in a
-- table of their own.
--
-- Version 8 kept a partition's lease on its owner row, which is also the
-- retention lock that subscription creation, saves and trims hold until
-- they commit: a client paused inside one of those transactions held up
-- the lease renewals of every node. Now the lease (owner, epoch, end)
-- lives in sluice_partition_leases, which only the balancer and the
-- writes it fences lock, and the checkpoint in
-- sluice_partition_checkpoints, which the data path locks.
--
-- As in the earlier versions, the file can run again after a start that
-- died part way: the tables are created when missing, the rows copied
-- (INSERT IGNORE) while the old table is there, and the old table is
-- dropped last.
--
-- updated_at moves forward at every write, by at least 1 even within one
-- millisecond: the connection reports changed rows, not matched ones
-- (clientFoundRows off), and a write that changes nothing else must still
-- count as applied.

-- A partition's lease: its owner, the epoch (one more at each
-- acquisition; writes fenced by an older one are refused), and until when
-- it holds (ms, by the database's clock; 0 when released or never
-- leased). A save, a park or a fault under an epoch locks the row until
-- it commits, so that no acquisition lands in between.
CREATE TABLE IF NOT EXISTS sluice_partition_leases (
    service      VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition`  INT      NOT NULL,
    owner        VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    epoch        BIGINT   NOT NULL,
    lease_until  BIGINT   NOT NULL,
    updated_at   BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A partition's checkpoint: every subscription is done with the
-- partition's records at or below it. The row is also the partition's
-- retention lock: creating a subscription, saving progress and trimming
-- take it (FOR UPDATE, held until commit).
CREATE TABLE IF NOT EXISTS sluice_partition_checkpoints (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition` INT      NOT NULL,
    checkpoint  BIGINT   NOT NULL,
    updated_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 1,
    'INSERT IGNORE INTO sluice_partition_leases (service, provider, `partition`, owner, epoch, lease_until, updated_at)
     SELECT service, provider, `partition`, owner, epoch, lease_until, updated_at FROM sluice_partition_owners',
    'DO 0')
    FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_owners');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 1,
    'INSERT IGNORE INTO sluice_partition_checkpoints (service, provider, `partition`, checkpoint, updated_at)
     SELECT service, provider, `partition`, checkpoint, updated_at FROM sluice_partition_owners',
    'DO 0')
    FROM information_schema.TABLES
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_partition_owners');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

DROP TABLE IF EXISTS sluice_partition_owners;
