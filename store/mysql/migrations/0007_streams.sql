-- sluice schema, MySQL/MariaDB dialect, version 7: the stream runtime.
--
-- As in the earlier versions, the file can run again after a start that
-- died part way (MySQL DDL is not transactional, and the whole file is
-- rerun): every table, with its indexes, is created only when missing.
--
-- Names (service, provider, owner, subscription id, consumer, namespace)
-- are ascii_bin, as in version 1; stream keys are the records' type,
-- VARCHAR(1024) utf8mb4_bin (up to 4,096 bytes). Key lengths are given
-- in bytes against InnoDB's 3072-byte limit.

-- The number of stream partitions of a tenant, recorded on first use: a
-- node configured with another number refuses to start, since streams
-- would hash onto other partitions.
CREATE TABLE IF NOT EXISTS sluice_stream_config (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partitions` INT     NOT NULL,
    created_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per partition that was ever owned: the owner ('' before the
-- first acquisition), its epoch (one more at each acquisition; progress
-- written under an older one is refused), and the checkpoint: every
-- subscription is done with the partition's records at or below it. The
-- row is also the partition's retention lock: creating a subscription and
-- trimming take it (FOR UPDATE).
--
-- updated_at moves forward at every write, by at least 1 even within one
-- millisecond: the connection reports changed rows, not matched ones
-- (clientFoundRows off), and a checkpoint saved again unchanged must still
-- count as applied, not as fenced.
CREATE TABLE IF NOT EXISTS sluice_partition_owners (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition` INT      NOT NULL,
    owner       VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    epoch       BIGINT   NOT NULL,
    checkpoint  BIGINT   NOT NULL DEFAULT 0,
    updated_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Subscriptions: of a consumer to one stream (stream_key set, partition
-- the stream's), or to every stream of a namespace (stream_key '',
-- partition -1). fault says why one stopped (at most 4096 bytes).
--
-- updated_at (not in the other dialects) moves forward at every fault or
-- clear, by at least 1, so that the update always changes the row: the
-- connection reports changed rows, and clearing a fault that is not set,
-- or setting the same fault twice in one millisecond, would otherwise
-- report 0, which the engine takes for a missing subscription.
--
-- The primary key is 100 + 100 + 260 bytes. The stream index cannot hold
-- the whole stream key: 100 + 100 + 260 + 4,096 bytes is past InnoDB's
-- 3072. It holds its first 512 characters (2,048 bytes; 2,508 in all), a
-- prefix that tells streams apart in practice; the full key is compared
-- on the rows the prefix finds.
CREATE TABLE IF NOT EXISTS sluice_stream_subscriptions (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    id          VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer    VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    namespace   VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    stream_key  VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    `partition` INT      NOT NULL,
    fault       TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    faulted_at  BIGINT,
    created_at  BIGINT   NOT NULL,
    updated_at  BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (service, provider, id),
    INDEX sluice_stream_subscriptions_stream (service, provider, namespace, stream_key(512)),
    INDEX sluice_stream_subscriptions_partition (service, provider, `partition`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Each subscription's position on each partition it reads: it is done
-- with every record at or below it. The primary key is 100 + 100 + 4 +
-- 260 bytes. The subscription index (not in the other dialects) lets
-- deleting a subscription find its rows, one per partition it reads, and
-- lock only them, instead of every row of the tenant.
CREATE TABLE IF NOT EXISTS sluice_stream_progress (
    service          VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider         VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition`      INT      NOT NULL,
    subscription_id  VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    position         BIGINT   NOT NULL,
    updated_at       BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`, subscription_id),
    INDEX sluice_stream_progress_subscription (service, provider, subscription_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Events a subscription gave up on, with a copy of the record (retention
-- may delete it from the log) and the last error (at most 4096 bytes).
-- The columns of the record have the types of sluice_records. The primary
-- key leaves the stream key out: 100 + 100 + 260 + 4 + 8 bytes.
CREATE TABLE IF NOT EXISTS sluice_stream_parked (
    service          VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider         VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subscription_id  VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition`      INT      NOT NULL,
    position         BIGINT   NOT NULL,
    namespace        VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    stream_key       VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    properties       MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload          LONGBLOB NOT NULL,
    appended_at      BIGINT   NOT NULL,
    error            TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    attempts         INT      NOT NULL,
    parked_at        BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, subscription_id, `partition`, position)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- How long a namespace's consumed records stay; no row: until consumed.
-- The primary key is 100 + 100 + 260 bytes.
CREATE TABLE IF NOT EXISTS sluice_stream_retention (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    namespace   VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    max_age_ms  BIGINT   NOT NULL,
    max_bytes   BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, namespace)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
