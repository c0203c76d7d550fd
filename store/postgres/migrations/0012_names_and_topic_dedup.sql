-- sluice schema, PostgreSQL dialect, version 12: entity names in one case,
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
-- and subscriptions stop checking on their own.

INSERT INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at)
SELECT service, provider, split_part(queue, '/Subscriptions/', 1), dedup_key, 0, MAX(expires_at)
FROM sluice_dedup
WHERE strpos(queue, '/Subscriptions/') > 1
GROUP BY service, provider, split_part(queue, '/Subscriptions/', 1), dedup_key
ON CONFLICT (service, provider, queue, dedup_key) DO NOTHING;
DELETE FROM sluice_dedup WHERE strpos(queue, '/Subscriptions/') > 1;
UPDATE sluice_queues SET dedup_window_ms = 0 WHERE strpos(name, '/Subscriptions/') > 1 AND dedup_window_ms <> 0;

CREATE TEMP TABLE sluice_renames ON COMMIT DROP AS
SELECT service, provider, name AS old_name, REPLACE(LOWER(name), '/subscriptions/', '/Subscriptions/') AS new_name
FROM sluice_queues
WHERE name <> REPLACE(LOWER(name), '/subscriptions/', '/Subscriptions/');
DELETE FROM sluice_renames
WHERE EXISTS (SELECT 1 FROM sluice_queues o
              WHERE o.service = sluice_renames.service AND o.provider = sluice_renames.provider
                AND o.name <> sluice_renames.old_name
                AND REPLACE(LOWER(o.name), '/subscriptions/', '/Subscriptions/') = sluice_renames.new_name);
UPDATE sluice_messages SET queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_messages.service AND r.provider = sluice_messages.provider AND r.old_name = sluice_messages.queue;
UPDATE sluice_dead_letters SET queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_dead_letters.service AND r.provider = sluice_dead_letters.provider AND r.old_name = sluice_dead_letters.queue;
UPDATE sluice_sessions SET queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_sessions.service AND r.provider = sluice_sessions.provider AND r.old_name = sluice_sessions.queue;
UPDATE sluice_dedup SET queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_dedup.service AND r.provider = sluice_dedup.provider AND r.old_name = sluice_dedup.queue;
UPDATE sluice_routed_schedules SET queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_routed_schedules.service AND r.provider = sluice_routed_schedules.provider AND r.old_name = sluice_routed_schedules.queue;
UPDATE sluice_routed_schedules SET copy_queue = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_routed_schedules.service AND r.provider = sluice_routed_schedules.provider AND r.old_name = sluice_routed_schedules.copy_queue;
UPDATE sluice_queues SET name = r.new_name FROM sluice_renames AS r
WHERE r.service = sluice_queues.service AND r.provider = sluice_queues.provider AND r.old_name = sluice_queues.name;

