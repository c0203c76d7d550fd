-- sluice schema, MySQL/MariaDB dialect, version 11: stream subscription
-- repositions.
--
-- An operator may move a subscription to a position, to the oldest
-- record retention kept, or to the head (past a retention gap, say).
-- repositions counts those moves: a save of progress writes a
-- subscription's position only under the count its owner knows, so that
-- one computed before a reposition never moves it back. repositioned
-- records the last one (JSON: kind, by, at, from and to per partition).
--
-- As in the earlier versions, each statement is chosen from
-- information_schema so that a start that died part way can run the
-- file again (MySQL 8 has no ADD COLUMN IF NOT EXISTS).

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_stream_subscriptions ADD COLUMN repositions BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_subscriptions' AND COLUMN_NAME = 'repositions');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_stream_subscriptions ADD COLUMN repositioned MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_subscriptions' AND COLUMN_NAME = 'repositioned');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
