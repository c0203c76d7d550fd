-- sluice schema, MySQL/MariaDB dialect, version 1 (MariaDB 10.6+, MySQL 8+).
-- Times are BIGINT milliseconds since the Unix epoch, taken from the
-- database clock. Every table leads with the tenant columns (service,
-- provider) so that deployments and named providers sharing one database
-- never touch each other's rows.
--
-- Names (service, provider, queue, consumer, namespace) are ASCII by
-- validation, so they are stored as ascii_bin: one byte a character keeps
-- primary keys short, and binary collation makes them case-sensitive as in
-- the other dialects. Message fields that come from users (message_id,
-- session_id, partition_key, content_type, stream_key) are utf8mb4_bin:
-- compared byte for byte, never folded.
--
-- MySQL has no partial indexes, so the indexes the SQLite dialect keeps
-- partial cover every row here; NULLs sort first, and the queries bound
-- their ranges so that the NULL part is never scanned.
--
-- Each statement ends with ';' at the end of a line: the engine splits the
-- file there and runs the statements one by one (MySQL DDL is not
-- transactional).

-- One row per queue: its settings, the last sequence number handed out
-- (the row is locked while a batch takes numbers, so numbers are gap-free
-- and in commit order) and the control column evict_at, the next time a
-- lease may win the race to run an eviction batch.
CREATE TABLE sluice_queues (
    service              VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider             VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name                 VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    last_seq             BIGINT   NOT NULL DEFAULT 0,
    max_delivery         INT      NOT NULL,
    default_ttl_ms       BIGINT   NOT NULL,
    dead_letter_expired  SMALLINT NOT NULL,
    dead_retention_ms    BIGINT   NOT NULL,
    evict_interval_ms    BIGINT   NOT NULL,
    evict_batch          INT      NOT NULL,
    evict_at             BIGINT   NOT NULL,
    created_at           BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Messages waiting, scheduled, leased or deferred.
-- state: 0 ready, 1 leased, 2 scheduled, 3 deferred.
-- visible_at: for leased and scheduled rows, when they become ready again;
-- NULL for ready and deferred rows.
CREATE TABLE sluice_messages (
    service         VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider        VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue           VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq             BIGINT   NOT NULL,
    state           SMALLINT NOT NULL,
    visible_at      BIGINT,
    expires_at      BIGINT,
    delivery_count  INT      NOT NULL DEFAULT 0,
    lock_token      BIGINT,
    enqueued_at     BIGINT   NOT NULL,
    message_id      VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    session_id      VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    partition_key   VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    content_type    VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    properties      MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload         LONGBLOB NOT NULL,
    PRIMARY KEY (service, provider, queue, seq),
    -- Leasing walks only ready rows, in sequence order: in-flight,
    -- scheduled and deferred rows are outside the scanned range, so a
    -- lease costs O(log K + B) whatever the backlog of leased rows.
    INDEX sluice_messages_ready (service, provider, queue, state, seq),
    -- Rows whose lease or schedule ends, in time order. Ready and deferred
    -- rows (visible_at NULL) sort first and lie outside the range the
    -- queries scan (visible_at <= now excludes NULL).
    INDEX sluice_messages_due (service, provider, queue, visible_at),
    -- Rows with a time-to-live, for eviction; the same about NULLs.
    INDEX sluice_messages_expiry (service, provider, queue, expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Dead letters keep the message's columns and say why and when.
CREATE TABLE sluice_dead_letters (
    service         VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider        VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue           VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq             BIGINT   NOT NULL,
    delivery_count  INT      NOT NULL,
    enqueued_at     BIGINT   NOT NULL,
    expires_at      BIGINT,
    message_id      VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    session_id      VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    partition_key   VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    content_type    VARCHAR(260) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    properties      MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload         LONGBLOB NOT NULL,
    reason          TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    description     TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    dead_at         BIGINT   NOT NULL,
    remove_at       BIGINT,
    PRIMARY KEY (service, provider, queue, seq),
    -- Dead letters due for removal by retention, oldest first; rows kept
    -- until purged (remove_at NULL) sort first, outside the scanned range.
    INDEX sluice_dead_letters_removal (service, provider, queue, remove_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per partition log: the last position handed out (locked while a
-- batch takes positions, so positions are gap-free and in commit order)
-- and the position through which retention trimmed it.
CREATE TABLE sluice_partitions (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition` INT      NOT NULL,
    head        BIGINT   NOT NULL,
    trimmed     BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (service, provider, `partition`)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE sluice_records (
    service      VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition`  INT      NOT NULL,
    position     BIGINT   NOT NULL,
    namespace    VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    stream_key   VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    properties   MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload      LONGBLOB NOT NULL,
    appended_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`, position)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A consumer's position on a partition, written only by the holder of the
-- newest epoch.
CREATE TABLE sluice_checkpoints (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition` INT      NOT NULL,
    consumer    VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    position    BIGINT   NOT NULL,
    epoch       BIGINT   NOT NULL,
    updated_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, `partition`, consumer)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
