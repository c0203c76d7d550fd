-- sluice schema, MySQL/MariaDB dialect, version 4: sessions.
--
-- As in versions 2 and 3, every statement can run again after a start
-- that died part way (MySQL DDL is not transactional, and the whole file
-- is rerun): the column and the index are added only when missing, chosen
-- from information_schema and run as prepared statements, and the table,
-- with its index, is created only when missing.

-- Fixed when the queue is created: every message carries a session id and
-- is received only under its session's lock. A column with a default,
-- last: added in place (ALGORITHM=INSTANT).
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_queues
        ADD COLUMN requires_session SMALLINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_queues'
      AND COLUMN_NAME = 'requires_session');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

-- One row per session of a queue that requires sessions: its lock (token,
-- and when it ends; 0 when free), its state (at most 256 KiB), and
-- whether a message of it may be available (active). Accepting the next
-- session walks sluice_sessions_free over the active sessions whose lock
-- has ended, so locked sessions are never read.
--
-- session_id is VARBINARY, compared byte for byte, as dedup_key is:
-- utf8mb4_bin pads with spaces (PAD SPACE), so sessions 's' and 's ' would
-- be one row, one lock. A session id is at most 260 bytes of UTF-8. The
-- primary key is 100 + 100 + 260 + 260 bytes, the free index the same plus
-- 2 + 8, well within InnoDB's 3072.
--
-- The index is declared with the table, so that creating it is as
-- idempotent as creating the table.
CREATE TABLE IF NOT EXISTS sluice_sessions (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue       VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id  VARBINARY(260) NOT NULL,
    active      SMALLINT NOT NULL DEFAULT 1,
    lock_token  BIGINT,
    lock_until  BIGINT   NOT NULL DEFAULT 0,
    state       LONGBLOB,
    PRIMARY KEY (service, provider, queue, session_id),
    -- Active sessions by the end of their lock: those free now (active =
    -- 1, lock_until <= now) are one range, oldest lock end first.
    INDEX sluice_sessions_free (service, provider, queue, active, lock_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A session's messages in sequence order, by state: a session's lease
-- reads its own ready messages only, and a renew or release its own leased
-- ones. MySQL has no partial indexes, so it covers every message (rows
-- without a session sort first, NULL); session_id is the messages'
-- VARCHAR(260) utf8mb4 (up to 1,040 bytes), so the key is 100 + 100 + 260
-- + 1,040 + 2 + 8 bytes, within InnoDB's 3072. Adding a secondary index
-- runs in place, without blocking writes (ALGORITHM=INPLACE, LOCK=NONE).
-- MySQL 8 has no ADD INDEX IF NOT EXISTS: the statement is chosen from
-- information_schema, as the column above.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_messages
        ADD INDEX sluice_messages_session (service, provider, queue, session_id, state, seq)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_messages'
      AND INDEX_NAME = 'sluice_messages_session');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
