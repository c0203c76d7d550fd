-- sluice schema, MariaDB / MySQL dialect, version 12: entity names in one case,
-- and duplicate detection kept by topics rather than their subscriptions.
--
-- Entity names are case-insensitive; the queue layer stores each in its
-- canonical form: lower case, with a subscription path's
-- "/Subscriptions/" segment as written. Existing names are renamed to
-- that form in every table, except where two names of a tenant would
-- become one: those are left as they were.
--
-- A topic now checks duplicates itself, before its fan-out. The ids its
-- subscriptions recorded move to the topic (the latest expiry of each),
-- and subscriptions stop checking on their own. Each statement can run
-- again if the migration died part way (MySQL runs no DDL in a
-- transaction): subscription ids are moved before they are deleted, and
-- queues are renamed last, so the renames are worked out again.

INSERT IGNORE INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at)
SELECT service, provider, SUBSTRING_INDEX(queue, '/Subscriptions/', 1), dedup_key, 0, MAX(expires_at)
FROM sluice_dedup
WHERE LOCATE('/Subscriptions/', queue) > 1
GROUP BY service, provider, SUBSTRING_INDEX(queue, '/Subscriptions/', 1), dedup_key;
DELETE FROM sluice_dedup WHERE LOCATE('/Subscriptions/', queue) > 1;
UPDATE sluice_queues SET dedup_window_ms = 0 WHERE LOCATE('/Subscriptions/', name) > 1 AND dedup_window_ms <> 0;

DROP TEMPORARY TABLE IF EXISTS sluice_renames;
CREATE TEMPORARY TABLE sluice_renames AS
SELECT service, provider, name AS old_name, REPLACE(LOWER(name), '/subscriptions/', '/Subscriptions/') AS new_name
FROM sluice_queues
WHERE name <> REPLACE(LOWER(name), '/subscriptions/', '/Subscriptions/');
DELETE FROM sluice_renames
WHERE EXISTS (SELECT 1 FROM sluice_queues o
              WHERE o.service = sluice_renames.service AND o.provider = sluice_renames.provider
                AND o.name <> sluice_renames.old_name
                AND REPLACE(LOWER(o.name), '/subscriptions/', '/Subscriptions/') = sluice_renames.new_name);
UPDATE sluice_messages AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.queue
SET t.queue = r.new_name;
UPDATE sluice_dead_letters AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.queue
SET t.queue = r.new_name;
UPDATE sluice_sessions AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.queue
SET t.queue = r.new_name;
UPDATE sluice_dedup AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.queue
SET t.queue = r.new_name;
UPDATE sluice_routed_schedules AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.queue
SET t.queue = r.new_name;
UPDATE sluice_routed_schedules AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.copy_queue
SET t.copy_queue = r.new_name;
UPDATE sluice_queues AS t JOIN sluice_renames AS r
  ON r.service = t.service AND r.provider = t.provider AND r.old_name = t.name
SET t.name = r.new_name;
DROP TEMPORARY TABLE sluice_renames;
