-- sluice schema, MySQL/MariaDB dialect, version 13: one stored body for
-- the copies of a large message.
--
-- A message sent to a topic is stored as a copy in each subscription it
-- reaches (and where those forward it). A large body is stored once: its
-- copies hold an empty payload and the id of a row of sluice_bodies
-- (body_id), and reads take the payload from there. A body no message or
-- dead letter refers to any more is deleted by a later eviction pass of
-- the tenant, which looks up the rows that refer to it by the indexes
-- below. (Neither server has partial indexes: a row holding its own
-- payload has an entry with a NULL body_id, at the end of its tenant's
-- range.)
--
-- As in the earlier versions, each statement can run again after a start
-- that died part way: the table is created only when missing, and each
-- column and index is added only when information_schema lacks it.
CREATE TABLE IF NOT EXISTS sluice_bodies (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload     LONGBLOB NOT NULL,
    PRIMARY KEY (id),
    KEY sluice_bodies_tenant (service, provider, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_messages ADD COLUMN body_id BIGINT NULL',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_messages' AND COLUMN_NAME = 'body_id');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_dead_letters ADD COLUMN body_id BIGINT NULL',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_dead_letters' AND COLUMN_NAME = 'body_id');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_messages ADD INDEX sluice_messages_body (service, provider, body_id)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_messages' AND INDEX_NAME = 'sluice_messages_body');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_dead_letters ADD INDEX sluice_dead_letters_body (service, provider, body_id)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_dead_letters' AND INDEX_NAME = 'sluice_dead_letters_body');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
