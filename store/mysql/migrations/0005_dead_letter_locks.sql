-- sluice schema, MySQL/MariaDB dialect, version 5: receiving from the
-- dead-letter queue. A dead letter received in peek-lock mode is locked
-- under a token until locked_until (0: free).
--
-- As in versions 2 to 4, the statement can run again after a start that
-- died part way (MySQL DDL is not transactional, and the whole file is
-- rerun): both columns are added in one ALTER TABLE (atomic), run only
-- when the first is missing, chosen from information_schema and run as a
-- prepared statement. The columns are nullable or have a default and go
-- last: added in place (ALGORITHM=INSTANT).
SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_dead_letters
        ADD COLUMN lock_token BIGINT,
        ADD COLUMN locked_until BIGINT NOT NULL DEFAULT 0',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_dead_letters'
      AND COLUMN_NAME = 'lock_token');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
