-- sluice schema, MySQL/MariaDB dialect, version 2: what the queue layer stores.
--
-- MySQL DDL is not transactional: the engine runs these statements one by
-- one on one connection, and records the version only after the last. A
-- start that dies part way leaves some columns added and the version
-- unrecorded, and the next start runs the whole file again. So each table
-- gets its columns in one ALTER TABLE (atomic in MariaDB 10.6+ and MySQL
-- 8), run only when its first column is missing: MySQL 8 has no ADD COLUMN
-- IF NOT EXISTS, so the statement is chosen from information_schema and run
-- as a prepared statement (the session variable lives on the migrating
-- connection). The new columns are nullable or have a default and go last,
-- so both servers add them in place (ALGORITHM=INSTANT) without copying
-- the table.

-- The queue layer's own settings of an entity, as JSON.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_queues
        ADD COLUMN attributes MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_queues'
      AND COLUMN_NAME = 'attributes');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

-- System properties (correlation id, subject, reply-to, ...) as a JSON
-- object, and whether a message was deferred: a deferred message whose
-- lease ends, or that is abandoned, goes back to state 3, not 0.
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_messages
        ADD COLUMN headers MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
        ADD COLUMN deferred SMALLINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_messages'
      AND COLUMN_NAME = 'headers');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_dead_letters
        ADD COLUMN headers MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_dead_letters'
      AND COLUMN_NAME = 'headers');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
