-- sluice queries, SQLite dialect.
--
-- Each query starts with a "-- name: Name" line. The engine passes the
-- arguments listed under the name, in that order; SQLite's numbered
-- parameters (?1, ?2, ...) may use them in any order. A list argument is a
-- JSON array; bulk rows are a JSON array of objects, payloads hex-encoded.
-- Times are milliseconds since the Unix epoch by the database clock:
-- CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER).
-- SQLite has one writer at a time, so the row locks other dialects take
-- with FOR UPDATE are implied by the write transaction.

-- name: CreateMigrationsTable
CREATE TABLE IF NOT EXISTS sluice_migrations (
    version     INTEGER PRIMARY KEY,
    applied_at  INTEGER NOT NULL
);

-- name: MigrateLock
BEGIN IMMEDIATE;

-- name: MigrateUnlock
COMMIT;

-- name: MigrateAbort
ROLLBACK;

-- name: AppliedMigrations
SELECT version FROM sluice_migrations ORDER BY version;

-- name: RecordMigration
-- args: version
INSERT INTO sluice_migrations (version, applied_at)
VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));

-- name: Now
SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER);

-- name: CreateQueue
-- args: service, provider, name, max_delivery, default_ttl_ms,
--       dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch,
--       attributes, dedup_window_ms, requires_session
INSERT INTO sluice_queues (service, provider, name, last_seq, max_delivery, default_ttl_ms,
    dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch, attributes,
    dedup_window_ms, requires_session, evict_at, created_at)
VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
    CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER),
    CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));

-- name: GetQueue
-- args: service, provider, name
-- The queue's settings, counters, the database's current time, and when
-- the first lease or schedule ends. SQLite reports 0 (due now), so that
-- every lease runs SelectDue: with no round trip, that index probe costs
-- less than finding the first due row here.
SELECT max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, evict_at, last_seq,
       CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), 0, dedup_window_ms,
       requires_session
FROM sluice_queues
WHERE service = ?1 AND provider = ?2 AND name = ?3;

-- name: GetQueueAttributes
-- args: service, provider, name
SELECT attributes FROM sluice_queues
WHERE service = ?1 AND provider = ?2 AND name = ?3;

-- name: UpdateQueue
-- args: max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
--       evict_interval_ms, evict_batch, attributes, dedup_window_ms, service,
--       provider, name
UPDATE sluice_queues
SET max_delivery = ?1, default_ttl_ms = ?2, dead_letter_expired = ?3, dead_retention_ms = ?4,
    evict_interval_ms = ?5, evict_batch = ?6, attributes = ?7, dedup_window_ms = ?8
WHERE service = ?9 AND provider = ?10 AND name = ?11;

-- name: ListQueues
-- args: service, provider, after, from, to, limit
-- Names after "after" in [from, to): a prefix's range of the primary key.
SELECT name, max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, attributes, dedup_window_ms, requires_session
FROM sluice_queues
WHERE service = ?1 AND provider = ?2 AND name > ?3 AND name >= ?4 AND name < ?5
ORDER BY name
LIMIT ?6;

-- name: DeleteQueue
-- args: service, provider, name
DELETE FROM sluice_queues WHERE service = ?1 AND provider = ?2 AND name = ?3;

-- name: DeleteQueueMessages
-- args: service, provider, name
DELETE FROM sluice_messages WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: DeleteQueueSessions
-- args: service, provider, name
DELETE FROM sluice_sessions WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: ActivateSessions
-- args: service, provider, queue, seqs
-- The sessions of the given messages may have messages available: mark
-- them active, creating their rows.
INSERT INTO sluice_sessions (service, provider, queue, session_id, active)
SELECT DISTINCT service, provider, queue, session_id, 1
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4)) AND session_id IS NOT NULL
ON CONFLICT (service, provider, queue, session_id) DO UPDATE SET active = 1;

-- name: SelectSessionCandidates
-- args: service, provider, queue, now, limit
-- Active sessions whose lock has ended, longest free first.
SELECT session_id
FROM sluice_sessions
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND active = 1 AND lock_until <= ?4
ORDER BY lock_until
LIMIT ?5;

-- name: HasReadySessionMessage
-- args: service, provider, queue, session_id, now
SELECT 1
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4 AND state = 0
  AND (expires_at IS NULL OR expires_at > ?5)
LIMIT 1;

-- name: DeactivateSession
-- args: service, provider, queue, session_id
UPDATE sluice_sessions SET active = 0
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4;

-- name: SelectIdleSessions
-- args: service, provider, queue, now, limit
-- Sessions an accept found empty, with no lock and no state: candidates
-- for deletion by eviction.
SELECT session_id
FROM sluice_sessions
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND active = 0 AND lock_until <= ?4
  AND state IS NULL
LIMIT ?5;

-- name: DeleteIdleSession
-- args: service, provider, queue, session_id, now, service, provider, queue, session_id
-- Deletes a session row that is still idle and has no message at all.
DELETE FROM sluice_sessions
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4
  AND active = 0 AND lock_until <= ?5 AND state IS NULL
  AND NOT EXISTS (SELECT 1 FROM sluice_messages
                  WHERE service = ?6 AND provider = ?7 AND queue = ?8 AND session_id = ?9);

-- name: EnsureSession
-- args: service, provider, queue, session_id
INSERT INTO sluice_sessions (service, provider, queue, session_id, active)
VALUES (?1, ?2, ?3, ?4, 0)
ON CONFLICT DO NOTHING;

-- name: LockSession
-- args: lock_token, lock_until, service, provider, queue, session_id, now
-- Locks a session whose lock has ended; changes nothing if it is held.
UPDATE sluice_sessions SET lock_token = ?1, lock_until = ?2
WHERE service = ?3 AND provider = ?4 AND queue = ?5 AND session_id = ?6 AND lock_until <= ?7;

-- name: SelectSessionLock
-- args: service, provider, queue, session_id
SELECT lock_token, lock_until
FROM sluice_sessions
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4;

-- name: SelectSessionReady
-- args: service, provider, queue, session_id, now, limit
-- A session's first ready, unexpired messages in sequence order.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4 AND state = 0
  AND (expires_at IS NULL OR expires_at > ?5)
ORDER BY seq
LIMIT ?6;

-- name: FirstSessionDue
-- args: service, provider, queue, session_id, now, service, provider, queue, session_id, now
-- The first message of a session that comes back before every later one
-- (NULL when none): a lease or delayed abandon that has ended and is not
-- ready again yet (another transaction resolving it may hold the row), or
-- a delayed abandon still waiting (not one of a deferred message, which
-- comes back deferred). A lease of the session takes nothing after it, so
-- the session's order holds. A message first scheduled takes a new number
-- when it activates, after every other: it holds nothing back.
-- Two branches, each cheap on its own index: the first reads the due
-- index's range (rows due and not resolved yet, few just after
-- resolveDue), the second the session index's range for state 2 (the
-- session's scheduled rows).
SELECT MIN(seq) FROM (
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4
    AND (state = 1 OR state = 2 AND delivery_count > 0) AND visible_at <= ?5
  UNION ALL
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = ?6 AND provider = ?7 AND queue = ?8 AND session_id = ?9
    AND state = 2 AND delivery_count > 0 AND deferred = 0 AND visible_at > ?10
) AS firsts;

-- name: RenewSession
-- args: lock_until, service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_until = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4 AND session_id = ?5 AND lock_token = ?6;

-- name: ExtendSessionMessages
-- args: visible_at, service, provider, queue, session_id, lock_token
-- The messages a session's holder has leased: their locks end with the
-- session's.
UPDATE sluice_messages SET visible_at = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4 AND session_id = ?5 AND state = 1
  AND lock_token = ?6;

-- name: ReleaseSession
-- args: service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_token = NULL, lock_until = 0, active = 1
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4 AND lock_token = ?5;

-- name: ReleaseSessionMessages
-- args: service, provider, queue, session_id, lock_token
-- The messages a releasing holder had leased become available (or
-- deferred) again, their delivery given back: a release is not a
-- delivery.
UPDATE sluice_messages
SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL,
    delivery_count = CASE WHEN delivery_count > 0 THEN delivery_count - 1 ELSE 0 END
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4 AND state = 1
  AND lock_token = ?5;

-- name: GetSessionState
-- args: service, provider, queue, session_id
SELECT state FROM sluice_sessions
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND session_id = ?4;

-- name: SetSessionState
-- args: state, service, provider, queue, session_id
UPDATE sluice_sessions SET state = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4 AND session_id = ?5;

-- name: DeleteQueueDedup
-- args: service, provider, name
DELETE FROM sluice_dedup WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: LockQueue
-- args: service, provider, name
-- Locks the queue's counter row until commit (the write transaction does,
-- in SQLite) and returns last_seq.
SELECT last_seq FROM sluice_queues
WHERE service = ?1 AND provider = ?2 AND name = ?3;

-- name: SelectDedup
-- args: service, provider, queue, now, keys
-- Of the given ids (a JSON array of strings), those accepted within the
-- window, with the sequence number they were accepted as.
SELECT dedup_key, seq
FROM sluice_dedup
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND expires_at > ?4
  AND dedup_key IN (SELECT value FROM json_each(?5));

-- name: UpsertDedup
-- args: service, provider, queue, rows
-- rows: [{"k":key,"s":seq,"e":expires_at}]; an expired row of the same key
-- is replaced.
INSERT INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at)
SELECT ?1, ?2, ?3, r.value ->> 'k', r.value ->> 's', r.value ->> 'e'
FROM json_each(?4) AS r
WHERE true
ON CONFLICT (service, provider, queue, dedup_key) DO UPDATE
SET seq = excluded.seq, expires_at = excluded.expires_at;

-- name: TrimDedup
-- args: service, provider, queue, now, limit
DELETE FROM sluice_dedup
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND dedup_key IN (
    SELECT dedup_key FROM sluice_dedup
    WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND expires_at <= ?4
    ORDER BY expires_at
    LIMIT ?5);

-- name: DeleteQueueDeadLetters
-- args: service, provider, name
DELETE FROM sluice_dead_letters WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: ReserveSeqs
-- args: n, service, provider, name
-- Returns the new last_seq.
UPDATE sluice_queues SET last_seq = last_seq + ?1
WHERE service = ?2 AND provider = ?3 AND name = ?4
RETURNING last_seq;

-- name: InsertMessage
-- args: service, provider, queue, seq, state, visible_at, expires_at,
--       enqueued_at, message_id, session_id, partition_key, content_type,
--       properties, payload, headers, body_id
-- One message a statement, its values bound (the dialect's choice: with
-- no round trip to save, binding beats decoding a JSON list, about 9% of
-- e2e). Empty names are stored as NULL, as the other dialects' JSON rows
-- leave them out.
INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
    delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
    content_type, properties, payload, headers, body_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, NULL, ?8,
    NULLIF(?9, ''), NULLIF(?10, ''), NULLIF(?11, ''), NULLIF(?12, ''), ?13, ?14, ?15, ?16);

-- name: SelectDue
-- args: service, provider, queue, now, limit
-- Leased and scheduled rows whose time has come, oldest first.
SELECT seq, state, delivery_count, expires_at, deferred, visible_at, message_id, partition_key
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND visible_at IS NOT NULL AND visible_at <= ?4
ORDER BY visible_at
LIMIT ?5;

-- name: MakeReady
-- args: service, provider, queue, seqs
-- Ready again, or deferred again for a message that was deferred.
UPDATE sluice_messages
SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: ReleaseMessages
-- args: service, provider, queue, seqs
-- As MakeReady, giving back the delivery the lease counted: a release is
-- not a delivery.
UPDATE sluice_messages
SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL,
    delivery_count = CASE WHEN delivery_count > 0 THEN delivery_count - 1 ELSE 0 END
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: MakeDeferred
-- args: service, provider, queue, seqs
UPDATE sluice_messages SET state = 3, deferred = 1, visible_at = NULL, lock_token = NULL
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: SetProperties
-- args: properties, service, provider, queue, seqs
UPDATE sluice_messages SET properties = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4
  AND seq IN (SELECT value FROM json_each(?5));

-- name: SelectDeferred
-- args: service, provider, queue, seqs
-- Of the given rows, the deferred ones, with all columns (a deferred
-- message never expires).
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND state = 3
  AND seq IN (SELECT value FROM json_each(?4))
ORDER BY seq;

-- name: SelectScheduled
-- args: service, provider, queue, now, seqs
-- Of the given rows, those scheduled for later that were never delivered.
SELECT seq
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND +state = 2 AND delivery_count = 0 AND +visible_at > ?4
  AND seq IN (SELECT value FROM json_each(?5))
ORDER BY seq;

-- name: MakeScheduled
-- args: visible_at, service, provider, queue, seqs
UPDATE sluice_messages SET state = 2, visible_at = ?1, lock_token = NULL
WHERE service = ?2 AND provider = ?3 AND queue = ?4
  AND seq IN (SELECT value FROM json_each(?5));

-- name: ExtendLeases
-- args: visible_at, service, provider, queue, seqs
UPDATE sluice_messages SET visible_at = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4
  AND seq IN (SELECT value FROM json_each(?5));

-- name: MoveToDeadLetters
-- args: reason, description, dead_at, remove_at, service, provider, queue, seqs
INSERT INTO sluice_dead_letters (service, provider, queue, seq, delivery_count, enqueued_at,
    expires_at, message_id, session_id, partition_key, content_type, properties, payload, body_id,
    headers, reason, description, dead_at, remove_at)
SELECT service, provider, queue, seq, delivery_count, enqueued_at,
       expires_at, message_id, session_id, partition_key, content_type, properties, payload, body_id,
       headers, ?1, ?2, ?3, ?4
FROM sluice_messages
WHERE service = ?5 AND provider = ?6 AND queue = ?7
  AND seq IN (SELECT value FROM json_each(?8));

-- name: DeleteMessages
-- args: service, provider, queue, seqs
DELETE FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: InsertRoutedSchedules
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"q":copy_queue,"c":copy_seq,"v":visible_at}], distinct.
INSERT INTO sluice_routed_schedules (service, provider, queue, seq, copy_queue, copy_seq, visible_at)
SELECT ?1, ?2, ?3, r.value ->> 's', r.value ->> 'q', r.value ->> 'c', r.value ->> 'v'
FROM json_each(?4) AS r;

-- name: DeleteDueRoutedSchedules
-- args: service, provider, queue, now
-- The rows of sends whose time has come: their copies are no longer
-- scheduled.
DELETE FROM sluice_routed_schedules
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND visible_at <= ?4;

-- name: SelectRoutedSchedules
-- args: service, provider, queue, now, seqs
-- Of the given numbers, those of routed sends whose time has not come.
SELECT seq
FROM sluice_routed_schedules
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?5))
  AND copy_queue = '' AND copy_seq = 0 AND visible_at > ?4
ORDER BY seq;

-- name: SelectRoutedCopies
-- args: service, provider, queue, seqs
-- The copies of the given routed sends, by queue.
SELECT copy_queue, copy_seq
FROM sluice_routed_schedules
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4)) AND copy_queue <> ''
ORDER BY copy_queue, copy_seq;

-- name: DeleteRoutedSchedules
-- args: service, provider, queue, seqs
DELETE FROM sluice_routed_schedules
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: DeleteQueueRoutedSchedules
-- args: service, provider, name
DELETE FROM sluice_routed_schedules WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: TryLockQueue
-- args: service, provider, name
-- The queue's counter row, for a lease that activates scheduled messages
-- (SQLite's write transaction holds everything): last_seq.
SELECT last_seq FROM sluice_queues
WHERE service = ?1 AND provider = ?2 AND name = ?3;

-- name: ActivateScheduled
-- args: service, provider, queue, mapping, enqueued_at
-- mapping: [{"o":old_seq,"n":new_seq}]. Scheduled messages whose time came
-- are appended as if enqueued now: ready, under new numbers.
UPDATE sluice_messages
SET seq = (SELECT m.value ->> 'n' FROM json_each(?4) AS m WHERE m.value ->> 'o' = sluice_messages.seq),
    state = 0, visible_at = NULL, lock_token = NULL, enqueued_at = ?5
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value ->> 'o' FROM json_each(?4));

-- name: RenumberDedup
-- args: service, provider, queue, rows
-- rows: [{"k":dedup_key,"o":old_seq,"n":new_seq}]: the ids of activated
-- messages name their new numbers.
UPDATE sluice_dedup
SET seq = (SELECT r.value ->> 'n' FROM json_each(?4) AS r
           WHERE r.value ->> 'k' = sluice_dedup.dedup_key AND r.value ->> 'o' = sluice_dedup.seq)
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND dedup_key IN (SELECT value ->> 'k' FROM json_each(?4))
  AND EXISTS (SELECT 1 FROM json_each(?4) AS r
              WHERE r.value ->> 'k' = sluice_dedup.dedup_key AND r.value ->> 'o' = sluice_dedup.seq);

-- name: SelectReady
-- args: service, provider, queue, now, limit
-- The first ready, unexpired rows in sequence order, with all columns.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND state = 0
  AND (expires_at IS NULL OR expires_at > ?4)
ORDER BY seq
LIMIT ?5;

-- name: LeaseMessages
-- args: lock_token, visible_at, service, provider, queue, seqs
-- One lease request's messages (the dialect sets LeasePerRequest): with no
-- round trip to save, this is faster in SQLite than one statement joining
-- a whole group's rows.
UPDATE sluice_messages
SET state = 1, lock_token = ?1, visible_at = ?2, delivery_count = delivery_count + 1
WHERE service = ?3 AND provider = ?4 AND queue = ?5
  AND seq IN (SELECT value FROM json_each(?6));

-- name: SelectHeld
-- args: service, provider, queue, now, seqs
-- Of the given rows, those under a lease that has not ended. The rows are
-- found by primary key from the list; "+" keeps SQLite from walking the
-- due index over every lease that has not ended instead.
SELECT seq, lock_token, delivery_count
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND +state = 1 AND +visible_at > ?4
  AND seq IN (SELECT value FROM json_each(?5))
ORDER BY seq;

-- name: ClaimEviction
-- args: next_evict_at, service, provider, name, seen_evict_at
-- Compare-and-set on the control column: the one caller that moves it runs
-- the eviction batch.
UPDATE sluice_queues SET evict_at = ?1
WHERE service = ?2 AND provider = ?3 AND name = ?4 AND evict_at = ?5;

-- name: SelectExpired
-- args: service, provider, queue, now, now, limit
-- Rows whose time-to-live ran out, except those under a lease that has not
-- ended (their holder may still complete them) and deferred ones (which
-- never expire: their owner holds their numbers).
SELECT seq
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND expires_at IS NOT NULL AND expires_at <= ?4
  AND (state <> 1 OR visible_at <= ?5) AND deferred = 0
ORDER BY expires_at
LIMIT ?6;

-- name: SelectRemovableDeadLetters
-- args: service, provider, queue, now, limit
SELECT seq
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND remove_at IS NOT NULL AND remove_at <= ?4
ORDER BY remove_at
LIMIT ?5;

-- name: SelectDeadLetterSeqs
-- args: service, provider, queue, limit
SELECT seq
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
ORDER BY seq
LIMIT ?4;

-- name: LockDeadLetters
-- args: service, provider, queue, seqs
SELECT seq
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4))
ORDER BY seq;

-- name: DeleteDeadLetters
-- args: service, provider, queue, seqs
DELETE FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: ResubmitDeadLetters
-- args: enqueued_at, expires_at, mapping, service, provider, queue
-- mapping: [{"o":old_seq,"n":new_seq}]
-- The mapping drives the join (CROSS JOIN keeps SQLite from scanning every
-- dead letter of the queue once per mapping entry): one primary-key lookup
-- per dead letter.
INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
    delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
    content_type, properties, payload, body_id, headers)
SELECT d.service, d.provider, d.queue, m.value ->> 'n', 0, NULL, ?2,
       0, NULL, ?1, d.message_id, d.session_id, d.partition_key,
       d.content_type, d.properties, d.payload, d.body_id, d.headers
FROM json_each(?3) AS m
CROSS JOIN sluice_dead_letters AS d
WHERE d.service = ?4 AND d.provider = ?5 AND d.queue = ?6 AND d.seq = m.value ->> 'o';

-- name: PeekMessages
-- args: service, provider, queue, from_seq, limit
-- The last column, deferred, tells where a row whose lease or schedule
-- ended goes next (Peek reports its state as of now).
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers, deferred
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND seq >= ?4
ORDER BY seq
LIMIT ?5;

-- name: PeekDeadLetters
-- args: service, provider, queue, from_seq, limit
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND seq >= ?4
ORDER BY seq
LIMIT ?5;

-- name: ScanMessages
-- args: service, provider, queue, from_seq, limit
-- PeekMessages without the bodies: what a browse examines.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, NULL AS payload, headers, deferred
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND seq >= ?4
ORDER BY seq
LIMIT ?5;

-- name: PeekMessagesBySeqs
-- args: service, provider, queue, seqs
-- The columns of PeekMessages, of the rows named.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers, deferred
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4))
ORDER BY seq;

-- name: ScanDeadLetters
-- args: service, provider, queue, from_seq, limit
-- PeekDeadLetters without the bodies.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, NULL AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND seq >= ?4
ORDER BY seq
LIMIT ?5;

-- name: PeekDeadLettersBySeqs
-- args: service, provider, queue, seqs
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4))
ORDER BY seq;

-- name: SelectUnlocked
-- args: service, provider, queue, now, before, limit
-- The oldest messages no lock holds (a lease that has not ended),
-- enqueued before before, for a batch delete.
SELECT seq
FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND enqueued_at < ?5 AND NOT (state = 1 AND visible_at > ?4)
ORDER BY seq
LIMIT ?6;

-- name: DeleteUnlocked
-- args: service, provider, queue, now, seqs
-- Deletes the rows named that no lock holds.
DELETE FROM sluice_messages
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?5))
  AND NOT (state = 1 AND visible_at > ?4);

-- name: SelectDeadLetterReady
-- args: service, provider, queue, now, limit
-- A queue's first dead letters that no one holds, with the columns of
-- PeekDeadLetters.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND locked_until <= ?4
ORDER BY seq
LIMIT ?5;

-- name: LockDeadLetterRows
-- args: lock_token, locked_until, service, provider, queue, seqs
UPDATE sluice_dead_letters SET lock_token = ?1, locked_until = ?2
WHERE service = ?3 AND provider = ?4 AND queue = ?5
  AND seq IN (SELECT value FROM json_each(?6));

-- name: SelectHeldDeadLetters
-- args: service, provider, queue, now, seqs
-- Of the given dead letters, those under a lock that has not ended.
SELECT seq, lock_token
FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3 AND locked_until > ?4
  AND seq IN (SELECT value FROM json_each(?5))
ORDER BY seq;

-- name: UnlockDeadLetters
-- args: service, provider, queue, seqs
UPDATE sluice_dead_letters SET lock_token = NULL, locked_until = 0
WHERE service = ?1 AND provider = ?2 AND queue = ?3
  AND seq IN (SELECT value FROM json_each(?4));

-- name: ExtendDeadLetters
-- args: locked_until, service, provider, queue, seqs
UPDATE sluice_dead_letters SET locked_until = ?1
WHERE service = ?2 AND provider = ?3 AND queue = ?4
  AND seq IN (SELECT value FROM json_each(?5));

-- name: QueueStats
-- args: now, now, now, now, service, provider, queue
-- A row whose lease or schedule ended counts where it goes next: active,
-- or deferred for a deferred message; an active one whose time-to-live
-- ran out counts as expired.
SELECT COALESCE(SUM(CASE WHEN (state = 0 OR (state IN (1, 2) AND visible_at <= ?1 AND deferred = 0))
                          AND (expires_at IS NULL OR expires_at > ?1) THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN (state = 0 OR (state IN (1, 2) AND visible_at <= ?1 AND deferred = 0))
                          AND expires_at <= ?1 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 2 AND visible_at > ?2 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 1 AND visible_at > ?3 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN state = 3 OR (state IN (1, 2) AND visible_at <= ?4 AND deferred = 1) THEN 1 ELSE 0 END), 0),
       MIN(CASE WHEN (state = 0 OR (state IN (1, 2) AND visible_at <= ?1 AND deferred = 0))
                 AND (expires_at IS NULL OR expires_at > ?1) THEN enqueued_at END),
       MIN(CASE WHEN state = 3 OR (state IN (1, 2) AND visible_at <= ?4 AND deferred = 1) THEN enqueued_at END)
FROM sluice_messages
WHERE service = ?5 AND provider = ?6 AND queue = ?7;

-- name: CountDeadLetters
-- args: service, provider, queue
SELECT COUNT(*) FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3;

-- name: CountDeadLettersByReason
-- args: service, provider, queue
SELECT reason, COUNT(*) FROM sluice_dead_letters
WHERE service = ?1 AND provider = ?2 AND queue = ?3
GROUP BY reason;

-- name: BumpHead
-- args: n, service, provider, partition
UPDATE sluice_partitions SET head = head + ?1
WHERE service = ?2 AND provider = ?3 AND partition = ?4;

-- name: EnsurePartition
-- args: service, provider, partition
INSERT INTO sluice_partitions (service, provider, partition, head, trimmed)
VALUES (?1, ?2, ?3, 0, 0)
ON CONFLICT DO NOTHING;

-- name: GetPartition
-- args: service, provider, partition
SELECT head, trimmed, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM sluice_partitions
WHERE service = ?1 AND provider = ?2 AND partition = ?3;

-- name: InsertRecord
-- args: service, provider, partition, appended_at, position, namespace, stream_key, properties, payload
-- One record a statement, its values bound: with no round trip to save,
-- binding beats hex-encoding payloads into a JSON list and decoding it.
INSERT INTO sluice_records (service, provider, partition, position, namespace, stream_key,
    properties, payload, appended_at)
VALUES (?1, ?2, ?3, ?5, ?6, ?7, ?8, ?9, ?4);

-- name: ReadRecords
-- args: service, provider, partition, after, limit
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = ?1 AND provider = ?2 AND partition = ?3 AND position > ?4
ORDER BY position
LIMIT ?5;

-- name: ReadStreamRecords
-- args: service, provider, partition, namespace, stream_key, after, through, limit
-- One stream's records in (after, through]: a walk of the partition's
-- primary-key range after ?6, in position order, that passes over other
-- streams' records (SQLite has no index of streams: migration 0015 says
-- why).
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = ?1 AND provider = ?2 AND partition = ?3
  AND namespace = ?4 AND stream_key = ?5 AND position > ?6 AND position <= ?7
ORDER BY position
LIMIT ?8;

-- name: DeleteRecordRange
-- args: service, provider, partition, after, through
-- A range of the log, in primary key order: TrimConsumed bounds its size.
DELETE FROM sluice_records
WHERE service = ?1 AND provider = ?2 AND partition = ?3 AND position > ?4 AND position <= ?5;

-- name: SetTrimmed
-- args: through, service, provider, partition
UPDATE sluice_partitions SET trimmed = max(trimmed, min(?1, head))
WHERE service = ?2 AND provider = ?3 AND partition = ?4;

-- Streams: partition count, owners, subscriptions, progress, parked
-- events and retention.

-- name: GetStreamPartitions
-- args: service, provider
SELECT partitions FROM sluice_stream_config WHERE service = ?1 AND provider = ?2;

-- name: InsertStreamPartitions
-- args: service, provider, partitions
INSERT INTO sluice_stream_config (service, provider, partitions, created_at)
VALUES (?1, ?2, ?3, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))
ON CONFLICT DO NOTHING;

-- name: EnsurePartitionCheckpoint
-- args: service, provider, partition
-- A partition's checkpoint row, at 0, if it has none yet.
INSERT INTO sluice_partition_checkpoints (service, provider, partition, checkpoint, updated_at)
VALUES (?1, ?2, ?3, 0, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))
ON CONFLICT DO NOTHING;

-- name: LockPartitionCheckpoint
-- args: service, provider, partition
-- The partition's checkpoint row: the retention lock of the server
-- dialects (SQLite's write transaction holds everything).
SELECT checkpoint, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM sluice_partition_checkpoints
WHERE service = ?1 AND provider = ?2 AND partition = ?3;

-- name: GetPartitionCheckpoint
-- args: service, provider, partition
SELECT checkpoint
FROM sluice_partition_checkpoints
WHERE service = ?1 AND provider = ?2 AND partition = ?3;

-- name: SaveCheckpoint
-- args: checkpoint, service, provider, partition
-- The checkpoint never moves back.
UPDATE sluice_partition_checkpoints SET checkpoint = max(checkpoint, ?1), updated_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
WHERE service = ?2 AND provider = ?3 AND partition = ?4;

-- name: LowerCheckpoint
-- args: position, service, provider, partition
-- A subscription created behind the checkpoint takes it back with it.
UPDATE sluice_partition_checkpoints SET checkpoint = min(checkpoint, ?1)
WHERE service = ?2 AND provider = ?3 AND partition = ?4;

-- name: InsertSubscription
-- args: service, provider, id, consumer, namespace, stream_key, partition
INSERT INTO sluice_stream_subscriptions (service, provider, id, consumer, namespace, stream_key,
    partition, fault, faulted_at, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, NULL, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));

-- name: InsertProgress
-- args: service, provider, partition, subscription_id, position
INSERT INTO sluice_stream_progress (service, provider, partition, subscription_id, position, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));

-- name: DeleteSubscription
-- args: service, provider, id
DELETE FROM sluice_stream_subscriptions WHERE service = ?1 AND provider = ?2 AND id = ?3;

-- name: DeleteSubscriptionProgress
-- args: service, provider, id
DELETE FROM sluice_stream_progress WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3;

-- name: DeleteSubscriptionParked
-- args: service, provider, id
DELETE FROM sluice_stream_parked WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3;

-- name: SelectSubscriptions
-- args: service, provider, id, namespace, stream_key, by_partition, partition
-- id, namespace and stream_key select when not empty; by_partition (0 or
-- 1) selects the subscriptions that read a partition.
SELECT id, consumer, namespace, stream_key, partition, fault, faulted_at, created_at, repositions, repositioned
FROM sluice_stream_subscriptions
WHERE service = ?1 AND provider = ?2
  AND (?3 = '' OR id = ?3)
  AND (?4 = '' OR namespace = ?4)
  AND (?5 = '' OR stream_key = ?5)
  AND (?6 = 0 OR partition = ?7 OR partition = -1)
ORDER BY id;

-- name: ListSubscriptions
-- args: service, provider, namespace, stream_key, stream_key_bytes, from, to, after_consumer, after_id, limit
-- The subscriptions to one stream (stream_key '': to the whole
-- namespace) whose consumers' names in lower case are in [from, to),
-- after (after_consumer, after_id), in that order: a range of the index
-- sluice_stream_subscriptions_consumer (the row value is a range of it
-- too). stream_key_bytes, the key's length in bytes, matters to MariaDB
-- only: here it is checked against the key itself, once.
SELECT id, consumer, namespace, stream_key, partition, fault, faulted_at, created_at, repositions, repositioned
FROM sluice_stream_subscriptions
WHERE service = ?1 AND provider = ?2 AND namespace = ?3 AND stream_key = ?4 AND length(CAST(?4 AS BLOB)) = ?5
  AND lower(consumer) >= ?6 AND lower(consumer) < ?7
  AND (lower(consumer), id) > (?8, ?9)
ORDER BY lower(consumer), id
LIMIT ?10;

-- name: SetSubscriptionFault
-- args: service, provider, id, fault
UPDATE sluice_stream_subscriptions
SET fault = NULLIF(?4, ''), faulted_at = CASE WHEN ?4 = '' THEN NULL ELSE CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) END
WHERE service = ?1 AND provider = ?2 AND id = ?3;

-- name: SelectProgress
-- args: service, provider, partition
-- Each subscription's position on the partition with its count of
-- repositions, in one statement (one snapshot): a reposition writes both
-- in one transaction, so a reader never takes its position for one saved
-- under the count before it.
SELECT p.subscription_id, p.position, s.repositions
FROM sluice_stream_progress AS p
JOIN sluice_stream_subscriptions AS s
    ON s.service = p.service AND s.provider = p.provider AND s.id = p.subscription_id
WHERE p.service = ?1 AND p.provider = ?2 AND p.partition = ?3;

-- name: UpsertProgress
-- args: service, provider, partition, rows
-- rows: [{"id":subscription_id,"p":position,"v":repositions}]. A
-- subscription deleted meanwhile gets no row back, nor one repositioned
-- since its owner computed the position (its count is no longer v).
INSERT INTO sluice_stream_progress (service, provider, partition, subscription_id, position, updated_at)
SELECT ?1, ?2, ?3, r.value ->> 'id', r.value ->> 'p', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM json_each(?4) AS r
WHERE EXISTS (SELECT 1 FROM sluice_stream_subscriptions s
              WHERE s.service = ?1 AND s.provider = ?2 AND s.id = r.value ->> 'id'
                AND s.repositions = r.value ->> 'v')
ON CONFLICT (service, provider, partition, subscription_id) DO UPDATE
SET position = excluded.position, updated_at = excluded.updated_at;

-- name: MinProgress
-- args: service, provider, partition
-- The lowest stored position of a subscription on the partition (NULL
-- when none reads it).
SELECT MIN(position)
FROM sluice_stream_progress
WHERE service = ?1 AND provider = ?2 AND partition = ?3;

-- name: LockSubscription
-- args: service, provider, id
-- Whether a subscription exists, held until commit against its deletion
-- (SQLite's write transaction holds everything).
SELECT 1 FROM sluice_stream_subscriptions WHERE service = ?1 AND provider = ?2 AND id = ?3;

-- name: InsertParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position,"ns":namespace,"k":key,
--         "pr":properties_json,"p":payload_hex,"at":appended_at,
--         "e":error,"n":attempts}]; a row parked again is replaced.
INSERT INTO sluice_stream_parked (service, provider, subscription_id, partition, position,
    namespace, stream_key, properties, payload, appended_at, error, attempts, parked_at)
SELECT ?1, ?2, ?3, r.value ->> 'pa', r.value ->> 'po', r.value ->> 'ns', r.value ->> 'k',
       r.value ->> 'pr', unhex(r.value ->> 'p'), r.value ->> 'at', r.value ->> 'e', r.value ->> 'n', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM json_each(?4) AS r
WHERE true
ON CONFLICT (service, provider, subscription_id, partition, position) DO UPDATE
SET error = excluded.error, attempts = excluded.attempts, parked_at = excluded.parked_at;

-- name: SelectParked
-- args: service, provider, subscription_id, after_partition, after_position, limit
SELECT partition, position, namespace, stream_key, properties, payload, appended_at,
       error, attempts, parked_at
FROM sluice_stream_parked
WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3
  AND (partition, position) > (?4, ?5)
ORDER BY partition, position
LIMIT ?6;

-- name: DeleteParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position}]
DELETE FROM sluice_stream_parked
WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3
  AND (partition, position) IN (
    SELECT r.value ->> 'pa', r.value ->> 'po' FROM json_each(?4) AS r);

-- name: UpsertRetention
-- args: service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
INSERT INTO sluice_stream_retention (service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (service, provider, namespace) DO UPDATE
SET max_age_ms = excluded.max_age_ms, max_bytes = excluded.max_bytes,
    expiry_ms = excluded.expiry_ms, parked_ms = excluded.parked_ms;

-- name: DeleteRetention
-- args: service, provider, namespace
DELETE FROM sluice_stream_retention WHERE service = ?1 AND provider = ?2 AND namespace = ?3;

-- name: SelectRetentions
-- args: service, provider
SELECT namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
FROM sluice_stream_retention
WHERE service = ?1 AND provider = ?2;

-- name: MinProgressByNamespace
-- args: service, provider, partition
-- The lowest stored position of the partition's subscriptions of each
-- namespace.
SELECT s.namespace, MIN(p.position)
FROM sluice_stream_progress AS p
JOIN sluice_stream_subscriptions AS s
  ON s.service = p.service AND s.provider = p.provider AND s.id = p.subscription_id
WHERE p.service = ?1 AND p.provider = ?2 AND p.partition = ?3
GROUP BY s.namespace;

-- name: DeleteExpiredParked
-- args: service, provider, partition, namespace, parked_before
DELETE FROM sluice_stream_parked
WHERE service = ?1 AND provider = ?2 AND partition = ?3 AND namespace = ?4
  AND parked_at < ?5;

-- name: NamespaceBytes
-- args: service, provider, partition, after, through, namespaces
-- The payload bytes of each listed namespace's records in (after, through].
SELECT namespace, SUM(length(payload))
FROM sluice_records
WHERE service = ?1 AND provider = ?2 AND partition = ?3
  AND position > ?4 AND position <= ?5
  AND namespace IN (SELECT value FROM json_each(?6))
GROUP BY namespace;

-- name: TrimCandidates
-- args: service, provider, partition, after, through, limit
-- The first records after the trimmed position, oldest first, without
-- their payloads.
SELECT position, namespace, appended_at, length(payload)
FROM sluice_records
WHERE service = ?1 AND provider = ?2 AND partition = ?3
  AND position > ?4 AND position <= ?5
ORDER BY position
LIMIT ?6;

-- name: BenchCreateTable
-- The raw-insert benchmark's table: what the database does with no sluice
-- code in the path.
CREATE TABLE IF NOT EXISTS sluice_bench_raw (
    id       INTEGER PRIMARY KEY,
    payload  BLOB NOT NULL
);

-- name: BenchInsert
-- args: payload
-- One row: raw-insert's single-row transaction and raw-insert-naive's
-- statement a row. raw-insert repeats its VALUES row for a multi-row
-- INSERT (engine.valuesRows): keep it one row of plain ? placeholders.
INSERT INTO sluice_bench_raw (payload) VALUES (?);

-- name: BenchDropTable
DROP TABLE IF EXISTS sluice_bench_raw;

-- name: UpsertNode
-- args: service, provider, id, address, timeout_ms, node_group, consumers
-- Registers a node on its first heartbeat, records the next ones.
INSERT INTO sluice_nodes (service, provider, id, address, started_at, heartbeat_at, timeout_ms, node_group, consumers)
VALUES (?1, ?2, ?3, ?4, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), ?5, ?6, ?7)
ON CONFLICT (service, provider, id) DO UPDATE
SET address = excluded.address, timeout_ms = excluded.timeout_ms, node_group = excluded.node_group, consumers = excluded.consumers, heartbeat_at = max(heartbeat_at, excluded.heartbeat_at);

-- name: DeleteForgottenNodes
-- args: service, provider, forget_ms
DELETE FROM sluice_nodes
WHERE service = ?1 AND provider = ?2 AND heartbeat_at < CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) - ?3;

-- name: SelectNodes
-- args: service, provider
SELECT id, address, started_at, heartbeat_at, timeout_ms, node_group, consumers, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM sluice_nodes
WHERE service = ?1 AND provider = ?2
ORDER BY id;

-- name: DeleteNode
-- args: service, provider, id
DELETE FROM sluice_nodes WHERE service = ?1 AND provider = ?2 AND id = ?3;

-- name: SelectLeases
-- args: service, provider
SELECT l.node_group, l.partition, l.owner, l.epoch, l.lease_until, COALESCE(c.checkpoint, 0), l.cache_windows, l.cache_records,
       CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM sluice_partition_leases l
LEFT JOIN sluice_partition_checkpoints c ON c.service = l.service AND c.provider = l.provider AND c.partition = l.partition
WHERE l.service = ?1 AND l.provider = ?2
ORDER BY l.node_group, l.partition;

-- name: EnsurePartitionLease
-- args: service, provider, partition, node_group
-- A partition never leased in the group gets a row with no owner and
-- epoch 0.
INSERT INTO sluice_partition_leases (service, provider, partition, node_group, owner, epoch, lease_until, updated_at)
VALUES (?1, ?2, ?3, ?4, '', 0, 0, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))
ON CONFLICT DO NOTHING;

-- name: RenewLease
-- args: duration_ms, cache_windows, cache_records, service, provider, partition, owner, epoch, node_group
-- Extends a lease its owner still holds under its epoch (also one that
-- ended: nobody acquired it since, or the epoch would have moved), with
-- what the owner's cache of the partition holds.
UPDATE sluice_partition_leases
SET lease_until = max(lease_until + 1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + ?1),
    cache_windows = ?2, cache_records = ?3, updated_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
WHERE service = ?4 AND provider = ?5 AND node_group = ?9 AND partition = ?6 AND owner = ?7 AND epoch = ?8;

-- name: AcquireLease
-- args: owner, duration_ms, service, provider, partition, node_group
-- Takes a partition whose lease ended (or that was released, or never
-- leased: lease_until 0) under a new epoch, its new owner's cache
-- empty until it renews.
UPDATE sluice_partition_leases
SET owner = ?1, epoch = epoch + 1, lease_until = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + ?2,
    cache_windows = 0, cache_records = 0, updated_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
WHERE service = ?3 AND provider = ?4 AND node_group = ?6 AND partition = ?5 AND lease_until < CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER);

-- name: ReleaseLease
-- args: service, provider, partition, owner, epoch, node_group
UPDATE sluice_partition_leases
SET owner = '', lease_until = 0, cache_windows = 0, cache_records = 0, updated_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
WHERE service = ?1 AND provider = ?2 AND node_group = ?6 AND partition = ?3 AND owner = ?4 AND epoch = ?5;

-- name: LockLeaseNoWait
-- args: service, provider, partition, node_group
-- SQLite has one writer at a time and no row locks: a read.
SELECT epoch FROM sluice_partition_leases
WHERE service = ?1 AND provider = ?2 AND node_group = ?4 AND partition = ?3;

-- name: LockLeaseEpoch
-- args: service, provider, partition, node_group
-- A partition's epoch (SQLite's write transaction holds everything).
SELECT epoch FROM sluice_partition_leases
WHERE service = ?1 AND provider = ?2 AND node_group = ?4 AND partition = ?3;

-- name: SelectSubscriptionProgress
-- args: service, provider, subscription_id
-- A subscription's stored position on each partition it covers.
SELECT partition, position
FROM sluice_stream_progress
WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3
ORDER BY partition;

-- name: SetSubscriptionProgress
-- args: position, service, provider, partition, subscription_id
UPDATE sluice_stream_progress SET position = ?1, updated_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
WHERE service = ?2 AND provider = ?3 AND partition = ?4 AND subscription_id = ?5;

-- name: RecordReposition
-- args: reposition_json, service, provider, id
-- Counts and records a reposition, and clears the subscription's fault.
-- The reposition's time is the database's.
UPDATE sluice_stream_subscriptions
SET repositions = repositions + 1,
    repositioned = json_set(?1, '$.at', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)),
    fault = NULL, faulted_at = NULL
WHERE service = ?2 AND provider = ?3 AND id = ?4;

-- name: GetReposition
-- args: service, provider, id
SELECT repositions, repositioned FROM sluice_stream_subscriptions
WHERE service = ?1 AND provider = ?2 AND id = ?3;

-- name: InsertBody
-- args: service, provider, payload
-- Stores a body that the copies of one message share; returns its id.
INSERT INTO sluice_bodies (service, provider, payload) VALUES (?1, ?2, ?3)
RETURNING id;

-- name: SelectBodies
-- args: service, provider, after, limit
-- The tenant's next bodies after id after, in id order, each with whether
-- no message or dead letter refers to it (orphan). Nothing refers to a
-- body again once nothing does (a reference is written with its body, in
-- one transaction, or moved between the two tables in one), so an orphan
-- one read finds may be deleted later.
SELECT x.id,
       NOT EXISTS (SELECT 1 FROM sluice_messages AS m
                   WHERE m.service = x.service AND m.provider = x.provider AND m.body_id = x.id)
       AND NOT EXISTS (SELECT 1 FROM sluice_dead_letters AS d
                       WHERE d.service = x.service AND d.provider = x.provider AND d.body_id = x.id)
       AS orphan
FROM sluice_bodies AS x
WHERE x.service = ?1 AND x.provider = ?2 AND x.id > ?3
ORDER BY x.id
LIMIT ?4;

-- name: DeleteBodies
-- args: service, provider, ids
DELETE FROM sluice_bodies
WHERE service = ?1 AND provider = ?2 AND id IN (SELECT value FROM json_each(?3));

-- name: MarkHandled
-- args: service, provider, subscription, partition, position
-- Records that a transactional handler handled an event, in the
-- caller's transaction; no row is affected if it was recorded already.
INSERT OR IGNORE INTO sluice_stream_handled (service, provider, subscription_id, partition, position)
VALUES (?1, ?2, ?3, ?4, ?5);

-- name: SelectSubscriptionPosition
-- args: service, provider, partition, subscription
SELECT position FROM sluice_stream_progress
WHERE service = ?1 AND provider = ?2 AND partition = ?3 AND subscription_id = ?4;

-- name: ForgetHandled
-- args: service, provider, subscription, partition, through
DELETE FROM sluice_stream_handled
WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3 AND partition = ?4 AND position <= ?5;

-- name: DeleteSubscriptionHandled
-- args: service, provider, id
DELETE FROM sluice_stream_handled WHERE service = ?1 AND provider = ?2 AND subscription_id = ?3;
