-- sluice schema, MySQL/MariaDB dialect, version 14: a stream's
-- subscriptions by consumer.
--
-- A listing of the subscriptions to one stream (or to a whole namespace)
-- selects and pages them by consumer, in the order of the consumers'
-- names in lower case (grants compare names so), then of their ids: the
-- generated column consumer_lc holds the name in lower case, and the
-- index sluice_stream_subscriptions_consumer serves the listing, reading
-- the rows of the page and not those of other consumers. It extends
-- sluice_stream_subscriptions_stream, which it replaces. The key is
-- 100 + 100 + 260 + 2048 (512 characters of the stream key) + 260 + 260
-- bytes, under InnoDB's 3072.
--
-- As in the earlier versions, each statement is chosen from
-- information_schema so that a start that died part way can run the
-- file again.

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE sluice_stream_subscriptions ADD COLUMN consumer_lc VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin GENERATED ALWAYS AS (LOWER(consumer)) VIRTUAL',
    'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_subscriptions' AND COLUMN_NAME = 'consumer_lc');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) = 0,
    'CREATE INDEX sluice_stream_subscriptions_consumer ON sluice_stream_subscriptions (service, provider, namespace, stream_key(512), consumer_lc, id)',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_subscriptions'
      AND INDEX_NAME = 'sluice_stream_subscriptions_consumer');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;

SET @sluice_ddl = (SELECT IF(COUNT(*) > 0,
    'DROP INDEX sluice_stream_subscriptions_stream ON sluice_stream_subscriptions',
    'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sluice_stream_subscriptions'
      AND INDEX_NAME = 'sluice_stream_subscriptions_stream');
PREPARE sluice_ddl FROM @sluice_ddl;
EXECUTE sluice_ddl;
DEALLOCATE PREPARE sluice_ddl;
