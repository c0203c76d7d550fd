-- sluice schema, MySQL/MariaDB dialect, version 3: duplicate detection.
--
-- As in version 2, every statement can run again after a start that died
-- part way (MySQL DDL is not transactional, and the whole file is rerun):
-- the column is added only when missing, chosen from information_schema
-- and run as a prepared statement, and the table, with its index, is
-- created only when missing.

-- The window in milliseconds; 0 turns duplicate detection off. A column
-- with a default, last: added in place (ALGORITHM=INSTANT).
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_queues
        ADD COLUMN dedup_window_ms BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_queues'
      AND COLUMN_NAME = 'dedup_window_ms');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

-- One row per message id (with partition key) a queue with duplicate
-- detection accepted, kept until expires_at: the first message's sequence
-- number, returned to every duplicate send.
--
-- dedup_key is the message id (at most 260 bytes), prefixed by the
-- partition key (at most 260) and a 0x1F byte when there is one: at most
-- 521 bytes. It is VARBINARY, compared byte for byte: utf8mb4_bin pads
-- with spaces (PAD SPACE), so 'id' and 'id ' would be one key, and one
-- message would be taken for a duplicate of the other. The primary key is
-- 100 + 100 + 260 + 530 bytes, well within InnoDB's 3072.
--
-- The index is declared with the table, so that creating it is as
-- idempotent as creating the table.
CREATE TABLE IF NOT EXISTS sluice_dedup (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue       VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    dedup_key   VARBINARY(530) NOT NULL,
    seq         BIGINT   NOT NULL,
    expires_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, queue, dedup_key),
    -- Ids whose window ended, oldest first, for eviction.
    INDEX sluice_dedup_expiry (service, provider, queue, expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
