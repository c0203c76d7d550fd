-- sluice queries, PostgreSQL dialect.
--
-- Each query starts with a "-- name: Name" line. The engine passes the
-- arguments listed under the name, in that order; PostgreSQL's numbered
-- parameters ($1, $2, ...) may use them in any order and more than once.
-- Parameters whose type the context does not fix are cast explicitly.
-- A list argument is a bigint[]; bulk rows are a JSON array of objects,
-- payloads hex-encoded, expanded with json_to_recordset.
--
-- Rows named by a list are matched on the whole primary key,
--   (service, provider, queue, seq) IN (SELECT $1, $2, $3, unnest($n))
-- rather than with "service = $1 AND ... AND seq = ANY($n)", so that the
-- planner looks each one up in the primary key. With seq = ANY, a plan
-- made while the statistics undercount a queue (one filled in a burst
-- since the last ANALYZE, or one big queue among many small ones) applies
-- seq = ANY as a filter to every row of the queue: settling 32 messages
-- then reads the whole queue.
-- Times are milliseconds since the Unix epoch by the database clock:
-- floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint.
-- clock_timestamp(), not now(): now() is fixed at the start of the
-- transaction, and a transaction may wait on row locks for a while.
--
-- Locking: the queue's counter row and a partition's head row are locked
-- by the UPDATE that takes numbers from them. Leases and eviction take the
-- message and dead-letter rows they work on with FOR UPDATE SKIP LOCKED,
-- so concurrent leasers never wait on each other and never take the same
-- row; settles and resubmits lock the rows their callers name with a
-- waiting FOR UPDATE, in sequence order, so that they see the outcome of a
-- lease in progress and two of them cannot deadlock.
-- The advisory lock key 126879297332069 is "sluice" in ASCII.

-- name: CreateMigrationsTable
-- Runs under MigrateLock, so concurrent starts never race to create it.
CREATE TABLE IF NOT EXISTS sluice_migrations (
    version     BIGINT PRIMARY KEY,
    applied_at  BIGINT NOT NULL
);

-- name: MigrateLock
-- A session lock: the engine applies each migration in a transaction of
-- its own (TxMigrations) on the connection that holds it.
SELECT pg_advisory_lock(126879297332069);

-- name: MigrateUnlock
SELECT pg_advisory_unlock(126879297332069);

-- name: MigrateAbort
SELECT pg_advisory_unlock(126879297332069);

-- name: AppliedMigrations
SELECT version FROM sluice_migrations ORDER BY version;

-- name: RecordMigration
-- args: version
INSERT INTO sluice_migrations (version, applied_at)
VALUES ($1, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);

-- name: Now
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;

-- name: Notify
-- args: payload (the engine's origin and a hub key)
-- Delivered to every listener on channel sluice when the transaction
-- commits (and dropped if it rolls back).
SELECT pg_notify('sluice', $1::text);

-- name: CreateQueue
-- args: service, provider, name, max_delivery, default_ttl_ms,
--       dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch,
--       attributes, dedup_window_ms, requires_session
-- A new queue starts with no ready floor: one a deleted queue of the name
-- left (DeleteQueueReadyFloors should leave none) would strand its
-- messages. If the queue exists, the insert fails and deletes nothing.
WITH f AS (
    DELETE FROM sluice_ready_floors WHERE service = $1 AND provider = $2 AND queue = $3
)
INSERT INTO sluice_queues (service, provider, name, last_seq, max_delivery, default_ttl_ms,
    dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch, attributes,
    dedup_window_ms, requires_session, evict_at, created_at)
VALUES ($1, $2, $3, 0, $4, $5, $6, $7, $8, $9, $10::text, $11::bigint, $12::smallint,
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);

-- name: GetQueue
-- args: service, provider, name
-- The queue's settings, counters, the database's current time, the
-- earliest end of a lease or schedule (NULL: none), read from the first
-- entry of the due index, so that a lease skips SelectDue when nothing is
-- due, the duplicate detection window and whether the queue requires
-- sessions.
SELECT max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, evict_at, last_seq,
       floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
       (SELECT m.visible_at FROM sluice_messages AS m
        WHERE m.service = q.service AND m.provider = q.provider AND m.queue = q.name
          AND m.visible_at IS NOT NULL
        ORDER BY m.visible_at LIMIT 1),
       dedup_window_ms, requires_session
FROM sluice_queues AS q
WHERE service = $1 AND provider = $2 AND name = $3;

-- name: GetQueueAttributes
-- args: service, provider, name
SELECT attributes FROM sluice_queues
WHERE service = $1 AND provider = $2 AND name = $3;

-- name: UpdateQueue
-- args: max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
--       evict_interval_ms, evict_batch, attributes, dedup_window_ms, service,
--       provider, name
-- PostgreSQL counts the rows matched, changed or not.
UPDATE sluice_queues
SET max_delivery = $1, default_ttl_ms = $2, dead_letter_expired = $3, dead_retention_ms = $4,
    evict_interval_ms = $5, evict_batch = $6, attributes = $7::text, dedup_window_ms = $8::bigint
WHERE service = $9 AND provider = $10 AND name = $11;

-- name: ListQueues
-- args: service, provider, after, from, to, limit
-- In byte order of the names, whatever the database's collation, as the
-- other dialects list them: a walk of the index sluice_queues_list, over
-- the names after "after" in [from, to) (a prefix's range).
SELECT name, max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, attributes, dedup_window_ms, requires_session
FROM sluice_queues
WHERE service = $1 AND provider = $2 AND name COLLATE "C" > $3::text
  AND name COLLATE "C" >= $4::text AND name COLLATE "C" < $5::text
ORDER BY name COLLATE "C"
LIMIT $6;

-- name: DeleteQueue
-- args: service, provider, name
DELETE FROM sluice_queues WHERE service = $1 AND provider = $2 AND name = $3;

-- name: DeleteQueueMessages
-- args: service, provider, name
DELETE FROM sluice_messages WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: DeleteQueueReadyFloors
-- args: service, provider, name
-- The floors of a queue being deleted, in a statement after
-- DeleteQueueMessages and so with a snapshot that sees every floor a
-- transaction made ready then inserted: the message delete waited for
-- it, on the message's row. A RaiseReadyFloor in progress has committed
-- too: DeleteQueue's delete of the queue's row waited for its lock.
DELETE FROM sluice_ready_floors WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: DeleteQueueSessions
-- args: service, provider, name
DELETE FROM sluice_sessions WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: ActivateSessions
-- args: service, provider, queue, seqs
-- The sessions of the given messages may have messages available: mark
-- them active, creating their rows. DISTINCT gives each session one row
-- (ON CONFLICT DO UPDATE may not touch a row twice), in session order, so
-- that two transactions lock the rows of the sessions they share in the
-- same order. A session already active is locked, not rewritten: the
-- lock still orders this against an accept clearing the flag (which
-- holds the row, FOR UPDATE, from SelectSessionCandidates to its
-- commit), and the condition is tested again on the row it committed.
-- The messages are looked up in the primary key behind the OFFSET 0
-- fence, which keeps "session_id IS NOT NULL" out of the scan: with it,
-- sluice_messages_session (whose predicate it is) holds every column the
-- scan needs, and a plan from undercounting statistics takes that index,
-- where seq is no bound, and reads the queue's messages in it once per
-- seq.
INSERT INTO sluice_sessions AS s (service, provider, queue, session_id, active)
SELECT DISTINCT $1::text, $2::text, $3::text, x.session_id, 1
FROM (SELECT m.session_id
      FROM sluice_messages AS m
      WHERE (m.service, m.provider, m.queue, m.seq) IN (
          SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
      OFFSET 0) AS x
WHERE x.session_id IS NOT NULL
ORDER BY x.session_id
ON CONFLICT (service, provider, queue, session_id) DO UPDATE SET active = 1
WHERE s.active = 0;

-- name: SelectSessionCandidates
-- args: service, provider, queue, now, limit
-- Active sessions whose lock has ended, longest free first: a range of
-- sluice_sessions_free (which holds active sessions only; lock_until <=
-- now), so locked and inactive sessions are not read. The rows are locked
-- until commit, and those another accepter holds skipped, so that
-- concurrent accepters neither wait on each other nor take the same
-- session.
SELECT session_id
FROM sluice_sessions
WHERE service = $1 AND provider = $2 AND queue = $3 AND active = 1 AND lock_until <= $4::bigint
ORDER BY lock_until
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: HasReadySessionMessage
-- args: service, provider, queue, session_id, now
-- A probe of sluice_messages_session (session_id = $4 implies its
-- predicate): the session's ready rows, not the queue's. The state is
-- compared with (SELECT 0), a value the planner does not know, rather
-- than 0, so that the partial index sluice_messages_ready (WHERE state =
-- 0) cannot serve the query: a plan from undercounting statistics, which
-- sees both indexes return one row, otherwise walks the queue's ready
-- rows there in search of the session's. (The comparison is still an
-- equality on the index column, and sequence order follows it.)
SELECT 1
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4 AND state = (SELECT 0)
  AND (expires_at IS NULL OR expires_at > $5::bigint)
LIMIT 1;

-- name: DeactivateSession
-- args: service, provider, queue, session_id
UPDATE sluice_sessions SET active = 0
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4;

-- name: SelectIdleSessions
-- args: service, provider, queue, now, limit
-- Sessions an accept found empty, with no lock and no state: candidates
-- for deletion by eviction. Rows another transaction holds are skipped.
SELECT session_id
FROM sluice_sessions
WHERE service = $1 AND provider = $2 AND queue = $3 AND active = 0 AND lock_until <= $4::bigint
  AND state IS NULL
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: DeleteIdleSession
-- args: service, provider, queue, session_id, now, service, provider, queue, session_id
-- Deletes a session row that is still idle and has no message at all (a
-- range of sluice_messages_session).
DELETE FROM sluice_sessions
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4
  AND active = 0 AND lock_until <= $5::bigint AND state IS NULL
  AND NOT EXISTS (SELECT 1 FROM sluice_messages
                  WHERE service = $6 AND provider = $7 AND queue = $8 AND session_id = $9);

-- name: EnsureSession
-- args: service, provider, queue, session_id
INSERT INTO sluice_sessions (service, provider, queue, session_id, active)
VALUES ($1, $2, $3, $4, 0)
ON CONFLICT DO NOTHING;

-- name: LockSession
-- args: lock_token, lock_until, service, provider, queue, session_id, now
-- Locks a session whose lock has ended; changes nothing if it is held.
-- (Waiting for another accept of the session in progress, it tests the
-- condition again on the row that accept committed.)
UPDATE sluice_sessions SET lock_token = $1::bigint, lock_until = $2::bigint
WHERE service = $3 AND provider = $4 AND queue = $5 AND session_id = $6
  AND lock_until <= $7::bigint;

-- name: SelectSessionLock
-- args: service, provider, queue, session_id
-- Locks the session's row until commit: the operations of a holder on its
-- session run one at a time, and each sees what the previous committed.
SELECT lock_token, lock_until
FROM sluice_sessions
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4
FOR UPDATE;

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
-- resolveDue) or the session index's, the second the session index's
-- range for state 2 (the session's scheduled rows).
SELECT MIN(seq) FROM (
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4
    AND (state = 1 OR state = 2 AND delivery_count > 0) AND visible_at <= $5::bigint
  UNION ALL
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = $6 AND provider = $7 AND queue = $8 AND session_id = $9
    AND state = 2 AND delivery_count > 0 AND deferred = 0 AND visible_at > $10::bigint
) AS firsts;

-- name: SelectSessionReady
-- args: service, provider, queue, session_id, now, limit
-- A session's first ready, unexpired messages in sequence order, with all
-- columns: a range of sluice_messages_session (state = (SELECT 0): see
-- HasReadySessionMessage). Only the session's holder leases them, under
-- the session's row lock; the rows are locked in sequence order, waiting
-- (rather than skipping, which would break the order) for an eviction in
-- progress.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4 AND state = (SELECT 0)
  AND (expires_at IS NULL OR expires_at > $5::bigint)
ORDER BY seq
LIMIT $6
FOR UPDATE;

-- name: RenewSession
-- args: lock_until, service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_until = $1::bigint
WHERE service = $2 AND provider = $3 AND queue = $4 AND session_id = $5
  AND lock_token = $6::bigint;

-- name: ExtendSessionMessages
-- args: visible_at, service, provider, queue, session_id, lock_token
-- The messages a session's holder has leased: their locks end with the
-- session's. (A range of sluice_messages_session: the session's leased
-- rows.)
UPDATE sluice_messages SET visible_at = $1::bigint
WHERE service = $2 AND provider = $3 AND queue = $4 AND session_id = $5 AND state = 1
  AND lock_token = $6::bigint;

-- name: ReleaseSession
-- args: service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_token = NULL, lock_until = 0, active = 1
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4
  AND lock_token = $5::bigint;

-- name: ReleaseSessionMessages
-- args: service, provider, queue, session_id, lock_token
-- The messages a releasing holder had leased become available (or
-- deferred) again, their delivery given back: a release is not a
-- delivery. (A queue that requires sessions keeps no ready floor: its
-- messages are leased through its sessions, never from the floor.)
UPDATE sluice_messages
SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL,
    delivery_count = CASE WHEN delivery_count > 0 THEN delivery_count - 1 ELSE 0 END
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4 AND state = 1
  AND lock_token = $5::bigint;

-- name: GetSessionState
-- args: service, provider, queue, session_id
SELECT state FROM sluice_sessions
WHERE service = $1 AND provider = $2 AND queue = $3 AND session_id = $4;

-- name: SetSessionState
-- args: state, service, provider, queue, session_id
-- state: bytes, or NULL to clear it.
UPDATE sluice_sessions SET state = $1::bytea
WHERE service = $2 AND provider = $3 AND queue = $4 AND session_id = $5;

-- name: DeleteQueueDedup
-- args: service, provider, name
DELETE FROM sluice_dedup WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: LockQueue
-- args: service, provider, name
-- Locks the queue's counter row until commit and returns last_seq: an
-- enqueue to a queue with duplicate detection holds it while it reads and
-- records ids, so that no other enqueue of the queue accepts the same id
-- meanwhile. (Under READ COMMITTED each later statement of the
-- transaction sees what the previous holder committed.)
SELECT last_seq FROM sluice_queues
WHERE service = $1 AND provider = $2 AND name = $3
FOR UPDATE;

-- name: SelectDedup
-- args: service, provider, queue, now, keys
-- Of the given ids (a JSON array of strings), those accepted within the
-- window, with the sequence number they were accepted as. Each id is
-- looked up in the primary key, as the lists above are; expiry is tested
-- behind the OFFSET 0 fence, so that the scan names no expires_at and
-- cannot use sluice_dedup_expiry (see the migration): with the test
-- pushed down, a plan made from undercounting statistics walks the
-- queue's rows in that index once per id.
SELECT dedup_key, seq
FROM (SELECT d.dedup_key, d.seq, d.expires_at
      FROM sluice_dedup AS d
      WHERE (d.service, d.provider, d.queue, d.dedup_key) IN (
          SELECT $1::text, $2::text, $3::text, json_array_elements_text($5::json))
      OFFSET 0) AS d
WHERE d.expires_at > $4::bigint;

-- name: UpsertDedup
-- args: service, provider, queue, rows
-- rows: [{"k":key,"s":seq,"e":expires_at}], keys distinct; an expired row
-- of the same key is replaced.
INSERT INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at)
SELECT $1::text, $2::text, $3::text, r.k, r.s, r.e
FROM json_to_recordset($4::json) AS r(k text, s bigint, e bigint)
ON CONFLICT (service, provider, queue, dedup_key) DO UPDATE
SET seq = excluded.seq, expires_at = excluded.expires_at;

-- name: TrimDedup
-- args: service, provider, queue, now, limit
-- Up to limit expired ids, oldest first, read from sluice_dedup_expiry and
-- locked (skipping those an enqueue or another trim holds) by the
-- subquery, which runs once, then deleted by primary key: unnest of the
-- array, like the lists above, keeps the planner's guess of its length
-- small, where a join on the subquery, with a generic plan not knowing
-- limit, hashes the whole table.
DELETE FROM sluice_dedup
WHERE (service, provider, queue, dedup_key) IN (
    SELECT $1::text, $2::text, $3::text, unnest(ARRAY(
        SELECT dedup_key FROM sluice_dedup
        WHERE service = $1 AND provider = $2 AND queue = $3 AND expires_at <= $4::bigint
        ORDER BY expires_at
        LIMIT $5
        FOR UPDATE SKIP LOCKED)));

-- name: DeleteQueueDeadLetters
-- args: service, provider, name
DELETE FROM sluice_dead_letters WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: ReserveSeqs
-- args: n, service, provider, name, notify payload
-- Returns the new last_seq. The one-row FROM item notifies listeners of the
-- queue in the same round trip (delivered at commit).
UPDATE sluice_queues SET last_seq = last_seq + $1::bigint
FROM (SELECT pg_notify('sluice', $5::text)) AS n
WHERE service = $2 AND provider = $3 AND name = $4
RETURNING last_seq;

-- name: InsertMessages
-- args: service, provider, queue, enqueued_at, seqs, states, visible_ats,
-- expires_ats, message_ids, session_ids, partition_keys, content_types,
-- properties, payloads, body_ids, headers
-- One array a column (capability ArrayInserts), n elements each, NULL
-- elements for what is not set; pgx binds them in binary, so payloads
-- travel as their bytes (an empty one, never NULL, where body_id names a
-- shared body).
INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
    delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
    content_type, properties, payload, body_id, headers)
SELECT $1::text, $2::text, $3::text, r.s, r.st, r.v, r.e,
       0, NULL, $4::bigint, r.mid, r.sid, r.pk, r.ct, r.pr, r.p, r.b, r.hd
FROM unnest($5::bigint[], $6::smallint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[],
            $11::text[], $12::text[], $13::text[], $14::bytea[], $15::bigint[], $16::text[])
     AS r(s, st, v, e, mid, sid, pk, ct, pr, p, b, hd);

-- name: SelectDue
-- args: service, provider, queue, now, limit
-- Leased and scheduled rows whose time has come, oldest first. Rows that
-- another transaction holds (a settle in progress, another leaser
-- promoting them) are skipped: they are that transaction's to resolve.
SELECT seq, state, delivery_count, expires_at, deferred, visible_at, message_id, partition_key
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3
  AND visible_at IS NOT NULL AND visible_at <= $4::bigint
ORDER BY visible_at
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: MakeReady
-- args: service, provider, queue, seqs
-- Ready again, or deferred again for a message that was deferred. The
-- queue's ready floor comes down to the first of those ready again, in
-- the same transaction (see sluice_ready_floors): an insert, which waits
-- for no other transaction. A queue that requires sessions keeps no
-- floor (see ReleaseSessionMessages).
WITH u AS (
    UPDATE sluice_messages
    SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL
    WHERE (service, provider, queue, seq) IN (
        SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
    RETURNING seq, state
)
INSERT INTO sluice_ready_floors (service, provider, queue, seq)
SELECT $1::text, $2::text, $3::text, min(seq) FROM u
WHERE state = 0 AND NOT EXISTS (
    SELECT 1 FROM sluice_queues
    WHERE service = $1 AND provider = $2 AND name = $3 AND requires_session = 1)
HAVING count(*) > 0;

-- name: ReleaseMessages
-- args: service, provider, queue, seqs
-- As MakeReady, giving back the delivery the lease counted: a release is
-- not a delivery.
WITH u AS (
    UPDATE sluice_messages
    SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL,
        delivery_count = CASE WHEN delivery_count > 0 THEN delivery_count - 1 ELSE 0 END
    WHERE (service, provider, queue, seq) IN (
        SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
    RETURNING seq, state
)
INSERT INTO sluice_ready_floors (service, provider, queue, seq)
SELECT $1::text, $2::text, $3::text, min(seq) FROM u
WHERE state = 0 AND NOT EXISTS (
    SELECT 1 FROM sluice_queues
    WHERE service = $1 AND provider = $2 AND name = $3 AND requires_session = 1)
HAVING count(*) > 0;

-- name: MakeDeferred
-- args: service, provider, queue, seqs
UPDATE sluice_messages SET state = 3, deferred = 1, visible_at = NULL, lock_token = NULL
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]));

-- name: SetProperties
-- args: properties, service, provider, queue, seqs
UPDATE sluice_messages SET properties = $1::text
WHERE (service, provider, queue, seq) IN (
    SELECT $2::text, $3::text, $4::text, unnest($5::bigint[]));

-- name: SelectDeferred
-- args: service, provider, queue, seqs
-- Of the given rows, the deferred ones, with all columns (a deferred
-- message never expires). The rows are locked in sequence order, waiting
-- for a lease or settle in progress.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE state = 3
  AND (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
ORDER BY seq
FOR UPDATE;

-- name: SelectScheduled
-- args: service, provider, queue, now, seqs
-- Of the given rows, those scheduled for later that were never delivered
-- (an abandon with a delay schedules a delivered one). The rows are locked
-- in sequence order, as in SelectDeferred.
SELECT seq
FROM sluice_messages
WHERE state = 2 AND delivery_count = 0 AND visible_at > $4::bigint
  AND (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($5::bigint[]))
ORDER BY seq
FOR UPDATE;

-- name: MakeScheduled
-- args: visible_at, service, provider, queue, seqs
UPDATE sluice_messages SET state = 2, visible_at = $1::bigint, lock_token = NULL
WHERE (service, provider, queue, seq) IN (
    SELECT $2::text, $3::text, $4::text, unnest($5::bigint[]));

-- name: ExtendLeases
-- args: visible_at, service, provider, queue, seqs
UPDATE sluice_messages SET visible_at = $1::bigint
WHERE (service, provider, queue, seq) IN (
    SELECT $2::text, $3::text, $4::text, unnest($5::bigint[]));

-- name: MoveToDeadLetters
-- args: reason, description, dead_at, remove_at, service, provider, queue, seqs
INSERT INTO sluice_dead_letters (service, provider, queue, seq, delivery_count, enqueued_at,
    expires_at, message_id, session_id, partition_key, content_type, properties, payload, body_id,
    headers, reason, description, dead_at, remove_at)
SELECT service, provider, queue, seq, delivery_count, enqueued_at,
       expires_at, message_id, session_id, partition_key, content_type, properties, payload, body_id,
       headers, $1::text, $2::text, $3::bigint, $4::bigint
FROM sluice_messages
WHERE (service, provider, queue, seq) IN (
    SELECT $5::text, $6::text, $7::text, unnest($8::bigint[]));

-- name: DeleteMessages
-- args: service, provider, queue, seqs
DELETE FROM sluice_messages
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]));

-- name: InsertRoutedSchedules
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"q":copy_queue,"c":copy_seq,"v":visible_at}], distinct.
INSERT INTO sluice_routed_schedules (service, provider, queue, seq, copy_queue, copy_seq, visible_at)
SELECT $1::text, $2::text, $3::text, r.s, r.q, r.c, r.v
FROM json_to_recordset($4::json) AS r(s bigint, q text, c bigint, v bigint);

-- name: DeleteDueRoutedSchedules
-- args: service, provider, queue, now
-- The rows of sends whose time has come: their copies are no longer
-- scheduled. The caller holds the queue's counter row, so no other
-- routed schedule of the queue deletes them at the same time.
DELETE FROM sluice_routed_schedules
WHERE service = $1 AND provider = $2 AND queue = $3 AND visible_at <= $4::bigint;

-- name: SelectRoutedSchedules
-- args: service, provider, queue, now, seqs
-- Of the given numbers, those of routed sends whose time has not come,
-- locked in number order, so that two cancels of one send take turns.
SELECT seq
FROM sluice_routed_schedules
WHERE (service, provider, queue, seq, copy_queue, copy_seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($5::bigint[]), ''::text, 0::bigint)
  AND visible_at > $4::bigint
ORDER BY seq
FOR UPDATE;

-- name: SelectRoutedCopies
-- args: service, provider, queue, seqs
-- The copies of the given routed sends, by queue.
SELECT copy_queue, copy_seq
FROM sluice_routed_schedules
WHERE service = $1 AND provider = $2 AND queue = $3
  AND seq = ANY ($4::bigint[]) AND copy_queue <> ''
ORDER BY copy_queue, copy_seq;

-- name: DeleteRoutedSchedules
-- args: service, provider, queue, seqs
DELETE FROM sluice_routed_schedules
WHERE service = $1 AND provider = $2 AND queue = $3 AND seq = ANY ($4::bigint[]);

-- name: DeleteQueueRoutedSchedules
-- args: service, provider, name
DELETE FROM sluice_routed_schedules WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: TryLockQueue
-- args: service, provider, name
-- Locks the queue's counter row until commit, unless another transaction
-- holds it (no row then): a lease that activates scheduled messages takes
-- their new numbers under it, and never waits.
SELECT last_seq FROM sluice_queues
WHERE service = $1 AND provider = $2 AND name = $3
FOR UPDATE SKIP LOCKED;

-- name: ActivateScheduled
-- args: service, provider, queue, mapping, enqueued_at
-- mapping: [{"o":old_seq,"n":new_seq}]. Scheduled messages whose time came
-- are appended as if enqueued now: ready, under new numbers. Each row is
-- looked up by the whole primary key, as in LeaseMessages.
UPDATE sluice_messages AS s
SET seq = m.n, state = 0, visible_at = NULL, lock_token = NULL, enqueued_at = $5::bigint
FROM (SELECT $1::text AS service, $2::text AS provider, $3::text AS queue, j.*
      FROM json_to_recordset($4::json) AS j(o bigint, n bigint)
      LIMIT json_array_length($4::json)) AS m
WHERE (s.service, s.provider, s.queue, s.seq) = (m.service, m.provider, m.queue, m.o);

-- name: RenumberDedup
-- args: service, provider, queue, rows
-- rows: [{"k":dedup_key,"o":old_seq,"n":new_seq}]: the ids of activated
-- messages name their new numbers.
UPDATE sluice_dedup AS d
SET seq = r.n
FROM (SELECT $1::text AS service, $2::text AS provider, $3::text AS queue, j.*
      FROM json_to_recordset($4::json) AS j(k text, o bigint, n bigint)
      LIMIT json_array_length($4::json)) AS r
WHERE (d.service, d.provider, d.queue, d.dedup_key) = (r.service, r.provider, r.queue, r.k) AND d.seq = r.o;

-- name: SelectReady
-- args: service, provider, queue, now, limit
-- The first ready, unexpired rows in sequence order, with all columns.
-- "state = 0" matches the partial index sluice_messages_ready, which holds
-- ready rows only; the scan starts at the queue's ready floor, past the
-- dead entries of rows leased since the last vacuum. Rows another leaser
-- is taking are skipped.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3 AND state = 0
  AND seq >= (SELECT coalesce(min(f.seq), 0) FROM sluice_ready_floors AS f
              WHERE f.service = $1 AND f.provider = $2 AND f.queue = $3)
  AND (expires_at IS NULL OR expires_at > $4::bigint)
ORDER BY seq
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: LeaseMessages
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"t":lock_token,"u":visible_at}], one per message; the
-- messages of one lease request share a token. (The LIMIT: see
-- CompleteMessages.) The subquery carries the
-- names as columns behind an OFFSET 0 fence, so that, as with the lists
-- above, each row is looked up by the whole primary key: with the names
-- visible as constants, a plan from undercounting statistics hashes the
-- list and reads the whole queue.
UPDATE sluice_messages AS m
SET state = 1, lock_token = r.t, visible_at = r.u, delivery_count = m.delivery_count + 1
FROM (SELECT $1::text AS service, $2::text AS provider, $3::text AS queue, j.*
      FROM json_to_recordset($4::json) AS j(s bigint, t bigint, u bigint)
      LIMIT json_array_length($4::json)) AS r
WHERE (m.service, m.provider, m.queue, m.seq) = (r.service, r.provider, r.queue, r.s);

-- name: CompleteMessages
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"t":lock_token}] in sequence order. (The LIMIT, the
-- list's length, tells the planner how few rows the list holds: guessing
-- a hundred, it hashes the whole queue for a few completions.) Deletes the messages
-- whose current, unexpired lease a receipt names, waiting for (and
-- rechecking after) a transaction that holds them, in sequence order
-- (the list drives a nested loop, as in LeaseMessages). Returns one row
-- per message deleted, or one row of NULLs if none was; no row at all if
-- the queue does not exist. Runs in a group's transaction or alone.
WITH q AS (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
    FROM sluice_queues
    WHERE service = $1 AND provider = $2 AND name = $3
), d AS (
    DELETE FROM sluice_messages AS m
    USING q, (SELECT $1::text AS service, $2::text AS provider, $3::text AS queue, j.*
              FROM json_to_recordset($4::json) AS j(s bigint, t bigint)
              LIMIT json_array_length($4::json)) AS r
    WHERE (m.service, m.provider, m.queue, m.seq) = (r.service, r.provider, r.queue, r.s)
      AND m.lock_token = r.t AND m.state = 1 AND m.visible_at > q.now
    RETURNING m.seq, m.lock_token
)
SELECT d.seq, d.lock_token FROM q LEFT JOIN d ON true;

-- name: EnqueueMessages
-- args: service, provider, queue, n, notify payload, ttls, visible_ats,
-- message_ids, session_ids, partition_keys, content_types, properties,
-- headers, payloads
-- The messages travel as n-element arrays, one a column (bigint[], text[],
-- bytea[]; NULL elements for what is not set), in binary: with pgx a
-- payload is sent as its bytes, where JSON would carry it hex-encoded for
-- the server to parse and decode (five times slower for 1-KiB payloads).
-- Message o (from 1, its place in the arrays) is numbered last_seq - n + o.
-- ReserveSeqs and InsertMessages in one statement: takes n numbers from
-- the queue's counter row (locked until commit), notifies, and inserts
-- message o as last_seq - n + o. State and expiry follow the engine's
-- newMessageRow: scheduled if visible_at is later than now, and the
-- time-to-live capped by the queue's default, counted from visible_at for
-- a scheduled message. Returns the new last_seq;
-- no row, and nothing written, if the queue does not exist, detects
-- duplicates (dedup_window_ms > 0) or requires sessions (whose sessions
-- the general path marks active): the engine then takes the general
-- path, in a transaction. (The insert takes its rows from q: no row of
-- q, no message.) Runs in a group's transaction or alone.
WITH q AS (
    UPDATE sluice_queues SET last_seq = last_seq + $4::bigint
    FROM (SELECT pg_notify('sluice', $5::text)) AS n
    WHERE service = $1 AND provider = $2 AND name = $3 AND dedup_window_ms = 0
      AND requires_session = 0
    RETURNING last_seq, default_ttl_ms,
              floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
), ins AS (
    INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
        delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
        content_type, properties, payload, headers)
    SELECT $1::text, $2::text, $3::text, q.last_seq - $4::bigint + r.o,
           CASE WHEN r.v > q.now THEN 2 ELSE 0 END,
           CASE WHEN r.v > q.now THEN r.v END,
           greatest(q.now, r.v) + CASE WHEN q.default_ttl_ms > 0 AND (r.t IS NULL OR r.t > q.default_ttl_ms)
                        THEN q.default_ttl_ms ELSE r.t END,
           0, NULL, q.now, r.mid, r.sid, r.pk, r.ct, r.pr, r.p, r.hd
    FROM q, unnest($6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[],
                   $12::text[], $13::text[], $14::bytea[])
            WITH ORDINALITY AS r(t, v, mid, sid, pk, ct, pr, hd, p, o)
)
SELECT last_seq FROM q;

-- name: EnqueueMessage
-- args: service, provider, queue, notify payload, ttl, visible_at,
-- message_id, session_id, partition_key, content_type, properties,
-- headers, payload
-- EnqueueMessages for one message, its columns as scalars: a lone send,
-- the commonest group at low load, costs less than arrays the statement
-- unnests (measured: about a tenth of a lone send's time). The same rows,
-- state, expiry and result as EnqueueMessages with n = 1.
WITH q AS (
    UPDATE sluice_queues SET last_seq = last_seq + 1
    FROM (SELECT pg_notify('sluice', $4::text)) AS n
    WHERE service = $1 AND provider = $2 AND name = $3 AND dedup_window_ms = 0
      AND requires_session = 0
    RETURNING last_seq, default_ttl_ms,
              floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
), ins AS (
    INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
        delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
        content_type, properties, payload, headers)
    SELECT $1::text, $2::text, $3::text, q.last_seq,
           CASE WHEN $6::bigint > q.now THEN 2 ELSE 0 END,
           CASE WHEN $6::bigint > q.now THEN $6::bigint END,
           greatest(q.now, $6::bigint) + CASE WHEN q.default_ttl_ms > 0 AND ($5::bigint IS NULL OR $5::bigint > q.default_ttl_ms)
                        THEN q.default_ttl_ms ELSE $5::bigint END,
           0, NULL, q.now, $7::text, $8::text, $9::text, $10::text, $11::text, $13::bytea, $12::text
    FROM q
)
SELECT last_seq FROM q;

-- name: LeaseAlone
-- args: service, provider, queue, requests, total
-- requests: [{"i":index,"n":max,"t":lock_token,"v":visibility_ms}] in
-- arrival order; total is the sum of their n. The update finds each
-- message by primary key from the rows c took: c carries the key columns
-- rather than the update naming the queue, so that no plan can start from
-- the queue's rows (with the names as constants, a queue the statistics
-- undercount is walked whole, once per row taken), and total is a
-- parameter, not computed from the list, so that the planner sees how few
-- rows c holds (guessing, it hashes the whole table instead). The lease requests of a group that holds nothing else,
-- alone: reads the queue's row (the columns of GetQueue), takes the first
-- ready messages as SelectReady does, for all requests together, and
-- leases them as LeaseMessages does, request i the next n of them in
-- sequence order under its token, in one statement. Returns the queue's
-- columns (those of GetQueue, in its order), the request index and each
-- leased message's columns, one row per message in sequence order, or one
-- row with NULL request and message columns if it took none; no row if
-- the queue does not exist or requires sessions (its messages are leased
-- only under a session's lock: the general path reports it). When a lease
-- or schedule has ended (next_due <= now) it takes nothing: those rows
-- must be resolved first, in a transaction, to keep sequence order. The
-- scan starts at the queue's ready floor, which every row returns as its
-- last column: the engine raises a floor it finds far behind the first
-- row taken (RaiseReadyFloor).
WITH fl AS (
    SELECT coalesce(min(seq), 0) AS floor FROM sluice_ready_floors
    WHERE service = $1 AND provider = $2 AND queue = $3
), q AS (
    SELECT max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
           evict_interval_ms, evict_batch, evict_at, last_seq,
           floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now,
           (SELECT m.visible_at FROM sluice_messages AS m
            WHERE m.service = q.service AND m.provider = q.provider AND m.queue = q.name
              AND m.visible_at IS NOT NULL
            ORDER BY m.visible_at LIMIT 1) AS next_due,
           dedup_window_ms, requires_session
    FROM sluice_queues AS q
    WHERE service = $1 AND provider = $2 AND name = $3 AND requires_session = 0
), r AS (
    SELECT j.i, j.t, j.v, sum(j.n) OVER (ORDER BY j.i) - j.n AS lo, sum(j.n) OVER (ORDER BY j.i) AS hi
    FROM json_to_recordset($4::json) AS j(i int, n int, t bigint, v bigint)
), c AS (
    SELECT x.service, x.provider, x.queue, x.seq, row_number() OVER (ORDER BY x.seq) AS rn
    FROM (SELECT m.service, m.provider, m.queue, m.seq
          FROM sluice_messages AS m, q
          WHERE m.service = $1 AND m.provider = $2 AND m.queue = $3 AND m.state = 0
            AND m.seq >= (SELECT floor FROM fl)
            AND (m.expires_at IS NULL OR m.expires_at > q.now)
            AND (q.next_due IS NULL OR q.next_due > q.now)
          ORDER BY m.seq
          LIMIT $5
          FOR UPDATE OF m SKIP LOCKED) AS x
), u AS (
    UPDATE sluice_messages AS m
    SET state = 1, lock_token = r.t, visible_at = q.now + r.v,
        delivery_count = m.delivery_count + 1
    FROM c, r, q
    WHERE (m.service, m.provider, m.queue, m.seq) = (c.service, c.provider, c.queue, c.seq)
      AND c.rn > r.lo AND c.rn <= r.hi
    RETURNING r.i, m.seq, m.state, m.visible_at, m.expires_at, m.delivery_count, m.enqueued_at,
              m.message_id, m.session_id, m.partition_key, m.content_type, m.properties, CASE WHEN m.body_id IS NULL THEN m.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = m.service AND b.provider = m.provider AND b.id = m.body_id) END AS payload,
              m.headers
)
SELECT q.*, u.*, (SELECT floor FROM fl) AS ready_floor FROM q LEFT JOIN u ON true ORDER BY u.seq;

-- name: RaiseReadyFloor
-- args: service, provider, queue
-- Moves the queue's ready floor (see sluice_ready_floors) to its first
-- ready message, or to its next number if none is ready, as this
-- statement's snapshot sees them: it inserts that floor and deletes the
-- floors the snapshot sees, while a message made ready since keeps the
-- floor its own statement inserted. The scan starts at the start of the
-- queue's range, not at the old floor: it steps over the dead index
-- entries once for every lease after it, and it finds a ready message
-- that no floor covers (made ready by a process built before floors
-- existed), which the floor then comes down to. The snapshot's last_seq,
-- not the locked row's (a lock reads the latest version): a message
-- numbered after the snapshot is invisible to the scan but numbered past
-- that last_seq. The queue's row is locked FOR KEY SHARE, for the length
-- of this statement: DeleteQueue waits for it, and a queue deleted
-- meanwhile gets no floor; a send to a queue with duplicate detection
-- (LockQueue) waits for it too, and an activation of scheduled messages
-- (TryLockQueue) leaves them for the next lease; no lease, settle or other
-- send conflicts with it.
WITH s AS (
    SELECT last_seq FROM sluice_queues
    WHERE service = $1 AND provider = $2 AND name = $3
), k AS (
    SELECT 1 FROM sluice_queues
    WHERE service = $1 AND provider = $2 AND name = $3
    FOR KEY SHARE
), n AS (
    SELECT coalesce(
        (SELECT m.seq FROM sluice_messages AS m
         WHERE m.service = $1 AND m.provider = $2 AND m.queue = $3 AND m.state = 0
         ORDER BY m.seq LIMIT 1),
        s.last_seq + 1) AS floor
    FROM s, k
), d AS (
    DELETE FROM sluice_ready_floors AS f
    USING n
    WHERE f.service = $1 AND f.provider = $2 AND f.queue = $3
)
INSERT INTO sluice_ready_floors (service, provider, queue, seq)
SELECT $1::text, $2::text, $3::text, floor FROM n;

-- name: SelectHeld
-- args: service, provider, queue, now, seqs
-- Of the given rows, those under a lease that has not ended. The rows are
-- locked in sequence order, waiting for a lease or settle in progress.
SELECT seq, lock_token, delivery_count
FROM sluice_messages
WHERE state = 1 AND visible_at > $4::bigint
  AND (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($5::bigint[]))
ORDER BY seq
FOR UPDATE;

-- name: ClaimEviction
-- args: next_evict_at, service, provider, name, seen_evict_at
-- Compare-and-set on the control column: the one caller that moves it runs
-- the eviction batch.
UPDATE sluice_queues SET evict_at = $1::bigint
WHERE service = $2 AND provider = $3 AND name = $4 AND evict_at = $5::bigint;

-- name: SelectExpired
-- args: service, provider, queue, now, now, limit
-- Rows whose time-to-live ran out, except those under a lease that has not
-- ended (their holder may still complete them) and deferred ones (which
-- never expire: their owner holds their numbers).
SELECT seq
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3
  AND expires_at IS NOT NULL AND expires_at <= $4::bigint
  AND (state <> 1 OR visible_at <= $5::bigint) AND deferred = 0
ORDER BY expires_at
LIMIT $6
FOR UPDATE SKIP LOCKED;

-- name: SelectRemovableDeadLetters
-- args: service, provider, queue, now, limit
SELECT seq
FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3
  AND remove_at IS NOT NULL AND remove_at <= $4::bigint
ORDER BY remove_at
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: SelectDeadLetterSeqs
-- args: service, provider, queue, limit
SELECT seq
FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3
ORDER BY seq
LIMIT $4
FOR UPDATE SKIP LOCKED;

-- name: LockDeadLetters
-- args: service, provider, queue, seqs
-- Waits for another resubmit or purge of the same rows, in sequence order.
SELECT seq
FROM sluice_dead_letters
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
ORDER BY seq
FOR UPDATE;

-- name: DeleteDeadLetters
-- args: service, provider, queue, seqs
DELETE FROM sluice_dead_letters
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]));

-- name: ResubmitDeadLetters
-- args: enqueued_at, expires_at, mapping, service, provider, queue
-- mapping: [{"o":old_seq,"n":new_seq}]
INSERT INTO sluice_messages (service, provider, queue, seq, state, visible_at, expires_at,
    delivery_count, lock_token, enqueued_at, message_id, session_id, partition_key,
    content_type, properties, payload, body_id, headers)
SELECT d.service, d.provider, d.queue, m.n, 0, NULL, $2::bigint,
       0, NULL, $1::bigint, d.message_id, d.session_id, d.partition_key,
       d.content_type, d.properties, d.payload, d.body_id, d.headers
FROM sluice_dead_letters AS d
JOIN json_to_recordset($3::json) AS m(o bigint, n bigint) ON d.seq = m.o
WHERE d.service = $4 AND d.provider = $5 AND d.queue = $6;

-- name: PeekMessages
-- args: service, provider, queue, from_seq, limit
-- The last column, deferred, tells where a row whose lease or schedule
-- ended goes next (Peek reports its state as of now).
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers, deferred
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3 AND seq >= $4::bigint
ORDER BY seq
LIMIT $5;

-- name: PeekDeadLetters
-- args: service, provider, queue, from_seq, limit
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3 AND seq >= $4::bigint
ORDER BY seq
LIMIT $5;

-- name: ScanMessages
-- args: service, provider, queue, from_seq, limit
-- PeekMessages without the bodies: what a browse examines.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, NULL::bytea AS payload, headers, deferred
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3 AND seq >= $4::bigint
ORDER BY seq
LIMIT $5;

-- name: PeekMessagesBySeqs
-- args: service, provider, queue, seqs
-- The columns of PeekMessages, of the rows named.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers, deferred
FROM sluice_messages
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
ORDER BY seq;

-- name: ScanDeadLetters
-- args: service, provider, queue, from_seq, limit
-- PeekDeadLetters without the bodies.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, NULL::bytea AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3 AND seq >= $4::bigint
ORDER BY seq
LIMIT $5;

-- name: PeekDeadLettersBySeqs
-- args: service, provider, queue, seqs
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]))
ORDER BY seq;

-- name: SelectUnlocked
-- args: service, provider, queue, now, before, limit
-- The oldest messages no lock holds (a lease that has not ended),
-- enqueued before before, for a batch delete.
SELECT seq
FROM sluice_messages
WHERE service = $1 AND provider = $2 AND queue = $3
  AND enqueued_at < $5::bigint AND NOT (state = 1 AND visible_at > $4::bigint)
ORDER BY seq
LIMIT $6;

-- name: DeleteUnlocked
-- args: service, provider, queue, now, seqs
-- Deletes the rows named that no lock holds. A lease that commits first
-- is seen: the row is checked again once its lock is released.
DELETE FROM sluice_messages
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($5::bigint[]))
  AND NOT (state = 1 AND visible_at > $4::bigint);

-- name: SelectDeadLetterReady
-- args: service, provider, queue, now, limit
-- A queue's first dead letters that no one holds, with the columns of
-- PeekDeadLetters: a walk of the queue's primary key range in sequence
-- order, passing over the locked ones (dead letters are few and rarely
-- received). The rows are locked until the lease commits, and those
-- another receiver is taking skipped, so that two receivers never wait
-- on each other nor take the same dead letter.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3 AND locked_until <= $4::bigint
ORDER BY seq
LIMIT $5
FOR UPDATE SKIP LOCKED;

-- name: LockDeadLetterRows
-- args: lock_token, locked_until, service, provider, queue, seqs
UPDATE sluice_dead_letters SET lock_token = $1::bigint, locked_until = $2::bigint
WHERE (service, provider, queue, seq) IN (
    SELECT $3::text, $4::text, $5::text, unnest($6::bigint[]));

-- name: SelectHeldDeadLetters
-- args: service, provider, queue, now, seqs
-- Of the given dead letters, those under a lock that has not ended. The
-- rows are locked in sequence order, waiting for a lease or settle in
-- progress.
SELECT seq, lock_token
FROM sluice_dead_letters
WHERE locked_until > $4::bigint
  AND (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($5::bigint[]))
ORDER BY seq
FOR UPDATE;

-- name: UnlockDeadLetters
-- args: service, provider, queue, seqs
UPDATE sluice_dead_letters SET lock_token = NULL, locked_until = 0
WHERE (service, provider, queue, seq) IN (
    SELECT $1::text, $2::text, $3::text, unnest($4::bigint[]));

-- name: ExtendDeadLetters
-- args: locked_until, service, provider, queue, seqs
UPDATE sluice_dead_letters SET locked_until = $1::bigint
WHERE (service, provider, queue, seq) IN (
    SELECT $2::text, $3::text, $4::text, unnest($5::bigint[]));

-- name: QueueStats
-- args: now, now, now, now, service, provider, queue
-- A row whose lease or schedule ended counts where it goes next: active,
-- or deferred for a deferred message; an active one whose time-to-live
-- ran out counts as expired.
SELECT COUNT(*) FILTER (WHERE (state = 0 OR (state IN (1, 2) AND visible_at <= $1::bigint AND deferred = 0))
                           AND (expires_at IS NULL OR expires_at > $1::bigint)),
       COUNT(*) FILTER (WHERE (state = 0 OR (state IN (1, 2) AND visible_at <= $1::bigint AND deferred = 0))
                           AND expires_at <= $1::bigint),
       COUNT(*) FILTER (WHERE state = 2 AND visible_at > $2::bigint),
       COUNT(*) FILTER (WHERE state = 1 AND visible_at > $3::bigint),
       COUNT(*) FILTER (WHERE state = 3 OR (state IN (1, 2) AND visible_at <= $4::bigint AND deferred = 1)),
       MIN(enqueued_at) FILTER (WHERE (state = 0 OR (state IN (1, 2) AND visible_at <= $1::bigint AND deferred = 0))
                                   AND (expires_at IS NULL OR expires_at > $1::bigint)),
       MIN(enqueued_at) FILTER (WHERE state = 3 OR (state IN (1, 2) AND visible_at <= $4::bigint AND deferred = 1))
FROM sluice_messages
WHERE service = $5 AND provider = $6 AND queue = $7;

-- name: CountDeadLetters
-- args: service, provider, queue
SELECT COUNT(*) FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3;

-- name: CountDeadLettersByReason
-- args: service, provider, queue
SELECT reason, COUNT(*) FROM sluice_dead_letters
WHERE service = $1 AND provider = $2 AND queue = $3
GROUP BY reason;

-- name: BumpHead
-- args: n, service, provider, partition
UPDATE sluice_partitions SET head = head + $1::bigint
WHERE service = $2 AND provider = $3 AND partition = $4;

-- name: BumpHeadReturning
-- args: n, service, provider, partition, notify payload
-- BumpHead, GetPartition and Notify in one round trip: returns the new
-- head and the database's time; the one-row FROM item notifies listeners
-- of the partition (delivered at commit). No row when the partition has
-- none yet.
UPDATE sluice_partitions SET head = head + $1::bigint
FROM (SELECT pg_notify('sluice', $5::text)) AS n
WHERE service = $2 AND provider = $3 AND partition = $4
RETURNING head, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;

-- name: AppendRecords
-- args: service, provider, head partitions, head counts, head keys,
--   partitions, below, namespaces, keys, properties, payloads
-- heads: each partition's number, records taken, notify payload (arrays)
-- rows: each record's partition, position below the new head, namespace,
--   stream key, properties JSON (or NULL) and payload (arrays; pgx binds
--   them in binary, so payloads travel as bytes)
-- The appends of a group to any partitions of one tenant in one
-- statement: takes positions from each head row (created on first use),
-- in partition order, inserts the records and notifies listeners of each
-- partition (delivered at commit). Returns each partition's new head and
-- the database's time. The head rows stay locked until the statement
-- commits, so positions become visible in order.
WITH heads AS (
    SELECT * FROM unnest($3::integer[], $4::bigint[], $5::text[]) AS h(pa, n, key)
), bumped AS (
    INSERT INTO sluice_partitions AS p (service, provider, partition, head, trimmed)
    SELECT $1::text, $2::text, h.pa, h.n, 0 FROM heads h ORDER BY h.pa
    ON CONFLICT (service, provider, partition) DO UPDATE SET head = p.head + EXCLUDED.head
    RETURNING p.partition, p.head
), clock AS (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
), inserted AS (
    INSERT INTO sluice_records (service, provider, partition, position, namespace, stream_key,
        properties, payload, appended_at)
    SELECT $1::text, $2::text, r.pa, b.head - r.o, r.ns, r.k, r.pr, r.p, clock.now
    FROM unnest($6::integer[], $7::bigint[], $8::text[], $9::text[], $10::text[], $11::bytea[])
        AS r(pa, o, ns, k, pr, p)
    JOIN bumped b ON b.partition = r.pa
    CROSS JOIN clock
)
SELECT b.partition, b.head, clock.now
FROM bumped b
JOIN heads h ON h.pa = b.partition
CROSS JOIN clock
CROSS JOIN LATERAL (SELECT pg_notify('sluice', h.key)) AS n;

-- name: AppendRecord
-- args: service, provider, partition, notify payload, namespace,
--   stream key, properties JSON (or NULL), payload
-- AppendRecords for one record, its columns as scalars: a lone publish,
-- the commonest group at low load, costs less than arrays to unnest. The
-- same rows and result as AppendRecords with one record.
WITH bumped AS (
    INSERT INTO sluice_partitions AS p (service, provider, partition, head, trimmed)
    VALUES ($1::text, $2::text, $3::integer, 1, 0)
    ON CONFLICT (service, provider, partition) DO UPDATE SET head = p.head + 1
    RETURNING p.partition, p.head
), clock AS (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now
), inserted AS (
    INSERT INTO sluice_records (service, provider, partition, position, namespace, stream_key,
        properties, payload, appended_at)
    SELECT $1::text, $2::text, b.partition, b.head, $5::text, $6::text, $7::text, $8::bytea, clock.now
    FROM bumped b
    CROSS JOIN clock
)
SELECT b.partition, b.head, clock.now
FROM bumped b
CROSS JOIN clock
CROSS JOIN LATERAL (SELECT pg_notify('sluice', $4::text)) AS n;

-- name: EnsurePartition
-- args: service, provider, partition
INSERT INTO sluice_partitions (service, provider, partition, head, trimmed)
VALUES ($1, $2, $3, 0, 0)
ON CONFLICT DO NOTHING;

-- name: GetPartition
-- args: service, provider, partition
SELECT head, trimmed, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM sluice_partitions
WHERE service = $1 AND provider = $2 AND partition = $3;

-- name: InsertRecords
-- args: service, provider, partition, appended_at, rows
-- rows: [{"s":position,"ns":namespace,"k":key,"pr":properties_json,"p":payload_hex}]
INSERT INTO sluice_records (service, provider, partition, position, namespace, stream_key,
    properties, payload, appended_at)
SELECT $1::text, $2::text, $3::integer, r.s, r.ns, r.k,
       r.pr, decode(r.p, 'hex'), $4::bigint
FROM json_to_recordset($5::json) AS r(s bigint, ns text, k text, pr text, p text);

-- name: ReadRecords
-- args: service, provider, partition, after, limit
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = $1 AND provider = $2 AND partition = $3 AND position > $4::bigint
ORDER BY position
LIMIT $5;

-- name: ReadStreamRecords
-- args: service, provider, partition, namespace, stream_key, after, through, limit
-- One stream's records in (after, through], by sluice_records_stream: its
-- range starts at the stream's first record after $6, in position order,
-- and holds no other stream's.
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = $1 AND provider = $2 AND partition = $3
  AND namespace = $4 AND stream_key = $5 AND position > $6::bigint AND position <= $7::bigint
ORDER BY position
LIMIT $8;

-- name: DeleteRecordRange
-- args: service, provider, partition, after, through
-- A range of the log, in primary key order: TrimConsumed bounds its size.
DELETE FROM sluice_records
WHERE service = $1 AND provider = $2 AND partition = $3::integer
  AND position > $4::bigint AND position <= $5::bigint;

-- name: SetTrimmed
-- args: through, service, provider, partition
UPDATE sluice_partitions SET trimmed = GREATEST(trimmed, LEAST($1::bigint, head))
WHERE service = $2 AND provider = $3 AND partition = $4;

-- Streams: partition count, owners, subscriptions, progress, parked
-- events and retention.

-- name: GetStreamPartitions
-- args: service, provider
SELECT partitions FROM sluice_stream_config WHERE service = $1 AND provider = $2;

-- name: InsertStreamPartitions
-- args: service, provider, partitions
INSERT INTO sluice_stream_config (service, provider, partitions, created_at)
VALUES ($1, $2, $3::integer, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
ON CONFLICT DO NOTHING;

-- name: EnsurePartitionCheckpoint
-- args: service, provider, partition
-- A partition's checkpoint row, at 0, if it has none yet.
INSERT INTO sluice_partition_checkpoints (service, provider, partition, checkpoint, updated_at)
VALUES ($1, $2, $3::integer, 0, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
ON CONFLICT DO NOTHING;

-- name: LockPartitionCheckpoint
-- args: service, provider, partition
-- The partition's checkpoint row, locked until commit: the retention lock
-- that subscription creation, saves and trimming take. (Under READ
-- COMMITTED each later statement of the transaction sees what the
-- previous holder committed: a trim waiting here then reads the progress
-- of a subscription created meanwhile, and a subscription creation
-- waiting here the trimmed position of a trim that ran meanwhile.)
SELECT checkpoint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM sluice_partition_checkpoints
WHERE service = $1 AND provider = $2 AND partition = $3::integer
FOR UPDATE;

-- name: GetPartitionCheckpoint
-- args: service, provider, partition
SELECT checkpoint
FROM sluice_partition_checkpoints
WHERE service = $1 AND provider = $2 AND partition = $3::integer;

-- name: SaveCheckpoint
-- args: checkpoint, service, provider, partition
-- The checkpoint never moves back. (The caller holds the lease row,
-- locked under its epoch.)
UPDATE sluice_partition_checkpoints
SET checkpoint = GREATEST(checkpoint, $1::bigint), updated_at = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE service = $2 AND provider = $3 AND partition = $4::integer;

-- name: LowerCheckpoint
-- args: position, service, provider, partition
-- A subscription created behind the checkpoint takes it back with it.
UPDATE sluice_partition_checkpoints SET checkpoint = LEAST(checkpoint, $1::bigint)
WHERE service = $2 AND provider = $3 AND partition = $4::integer;

-- name: InsertSubscription
-- args: service, provider, id, consumer, namespace, stream_key, partition
INSERT INTO sluice_stream_subscriptions (service, provider, id, consumer, namespace, stream_key,
    partition, fault, faulted_at, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7::integer, NULL, NULL, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);

-- name: InsertProgress
-- args: service, provider, partition, subscription_id, position
INSERT INTO sluice_stream_progress (service, provider, partition, subscription_id, position, updated_at)
VALUES ($1, $2, $3::integer, $4, $5::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);

-- name: DeleteSubscription
-- args: service, provider, id
DELETE FROM sluice_stream_subscriptions WHERE service = $1 AND provider = $2 AND id = $3;

-- name: DeleteSubscriptionProgress
-- args: service, provider, id
DELETE FROM sluice_stream_progress WHERE service = $1 AND provider = $2 AND subscription_id = $3;

-- name: DeleteSubscriptionParked
-- args: service, provider, id
DELETE FROM sluice_stream_parked WHERE service = $1 AND provider = $2 AND subscription_id = $3;

-- name: SelectSubscriptions
-- args: service, provider, id, namespace, stream_key, by_partition, partition
-- id, namespace and stream_key select when not empty; by_partition (0 or
-- 1) selects the subscriptions that read a partition. Ids are listed in
-- byte order, as the other dialects list them, whatever the collation.
SELECT id, consumer, namespace, stream_key, partition, fault, faulted_at, created_at, repositions, repositioned
FROM sluice_stream_subscriptions
WHERE service = $1 AND provider = $2
  AND ($3::text = '' OR id = $3::text)
  AND ($4::text = '' OR namespace = $4::text)
  AND ($5::text = '' OR stream_key = $5::text)
  AND ($6::integer = 0 OR partition = $7::integer OR partition = -1)
ORDER BY id COLLATE "C";

-- name: ListSubscriptions
-- args: service, provider, namespace, stream_key, stream_key_bytes, from, to, after_consumer, after_id, limit
-- The subscriptions to one stream (stream_key '': to the whole
-- namespace) whose consumers' names in lower case are in [from, to),
-- after (after_consumer, after_id), in that order, in byte order as the
-- other dialects list them: a range of the index
-- sluice_stream_subscriptions_consumer (the row comparison is a range of
-- it too). stream_key_bytes, the key's length in bytes, matters to
-- MariaDB only: here it is checked against the key itself, once (on a
-- column, the planner would misjudge how many rows it keeps).
SELECT id, consumer, namespace, stream_key, partition, fault, faulted_at, created_at, repositions, repositioned
FROM sluice_stream_subscriptions
WHERE service = $1 AND provider = $2 AND namespace = $3::text AND stream_key = $4::text AND octet_length($4::text) = $5::integer
  AND lower(consumer) COLLATE "C" >= $6::text AND lower(consumer) COLLATE "C" < $7::text
  AND (lower(consumer) COLLATE "C", id COLLATE "C") > ($8::text, $9::text)
ORDER BY lower(consumer) COLLATE "C", id COLLATE "C"
LIMIT $10;

-- name: SetSubscriptionFault
-- args: service, provider, id, fault
-- An empty fault clears it.
UPDATE sluice_stream_subscriptions
SET fault = NULLIF($4::text, ''),
    faulted_at = CASE WHEN $4::text = '' THEN NULL
                      ELSE floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint END
WHERE service = $1 AND provider = $2 AND id = $3;

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
WHERE p.service = $1 AND p.provider = $2 AND p.partition = $3::integer;

-- name: UpsertProgress
-- args: service, provider, partition, rows
-- rows: [{"id":subscription_id,"p":position,"v":repositions}], ids
-- distinct. A subscription repositioned since its owner computed the
-- position (its count is no longer v) gets no row back; nor does one
-- deleted meanwhile: the subscription's row
-- is locked FOR KEY SHARE while its progress is written, so a concurrent
-- DeleteSubscription either waits for this transaction (and its
-- DeleteSubscriptionProgress, a later statement, then deletes the row
-- written here) or commits first (and the row is not found).
INSERT INTO sluice_stream_progress (service, provider, partition, subscription_id, position, updated_at)
SELECT $1::text, $2::text, $3::integer, r.id, r.p, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM json_to_recordset($4::json) AS r(id text, p bigint, v bigint)
WHERE EXISTS (SELECT 1 FROM sluice_stream_subscriptions s
              WHERE s.service = $1::text AND s.provider = $2::text AND s.id = r.id
                AND s.repositions = r.v
              FOR KEY SHARE)
ON CONFLICT (service, provider, partition, subscription_id) DO UPDATE
SET position = excluded.position, updated_at = excluded.updated_at;

-- name: MinProgress
-- args: service, provider, partition
-- The lowest stored position of a subscription on the partition (NULL
-- when none reads it).
SELECT MIN(position)
FROM sluice_stream_progress
WHERE service = $1 AND provider = $2 AND partition = $3::integer;

-- name: LockSubscription
-- args: service, provider, id
-- Whether a subscription exists, held until commit against its deletion.
SELECT 1 FROM sluice_stream_subscriptions WHERE service = $1 AND provider = $2 AND id = $3
FOR SHARE;

-- name: InsertParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position,"ns":namespace,"k":key,
--         "pr":properties_json,"p":payload_hex,"at":appended_at,
--         "e":error,"n":attempts}]; a row parked again is replaced. An
-- event listed twice counts once, as its last row (ON CONFLICT DO UPDATE
-- refuses to update a row twice in one statement).
INSERT INTO sluice_stream_parked (service, provider, subscription_id, partition, position,
    namespace, stream_key, properties, payload, appended_at, error, attempts, parked_at)
SELECT DISTINCT ON (r.pa, r.po)
       $1::text, $2::text, $3::text, r.pa, r.po, r.ns, r.k,
       r.pr, decode(r.p, 'hex'), r.at, r.e, r.n, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM ROWS FROM (json_to_recordset($4::json) AS (pa integer, po bigint, ns text, k text,
    pr text, p text, at bigint, e text, n integer)) WITH ORDINALITY AS r(pa, po, ns, k, pr, p, at, e, n, i)
ORDER BY r.pa, r.po, r.i DESC
ON CONFLICT (service, provider, subscription_id, partition, position) DO UPDATE
SET error = excluded.error, attempts = excluded.attempts, parked_at = excluded.parked_at;

-- name: SelectParked
-- args: service, provider, subscription_id, after_partition, after_position, limit
SELECT partition, position, namespace, stream_key, properties, payload, appended_at,
       error, attempts, parked_at
FROM sluice_stream_parked
WHERE service = $1 AND provider = $2 AND subscription_id = $3
  AND (partition, position) > ($4::integer, $5::bigint)
ORDER BY partition, position
LIMIT $6;

-- name: DeleteParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position}], distinct; matched on the whole
-- primary key, as the lists above are.
DELETE FROM sluice_stream_parked
WHERE (service, provider, subscription_id, partition, position) IN (
    SELECT $1::text, $2::text, $3::text, r.pa, r.po
    FROM json_to_recordset($4::json) AS r(pa integer, po bigint));

-- name: UpsertRetention
-- args: service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
INSERT INTO sluice_stream_retention (service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms)
VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6::bigint, $7::bigint)
ON CONFLICT (service, provider, namespace) DO UPDATE
SET max_age_ms = excluded.max_age_ms, max_bytes = excluded.max_bytes,
    expiry_ms = excluded.expiry_ms, parked_ms = excluded.parked_ms;

-- name: DeleteRetention
-- args: service, provider, namespace
DELETE FROM sluice_stream_retention WHERE service = $1 AND provider = $2 AND namespace = $3;

-- name: SelectRetentions
-- args: service, provider
SELECT namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
FROM sluice_stream_retention
WHERE service = $1 AND provider = $2;

-- name: MinProgressByNamespace
-- args: service, provider, partition
-- The lowest stored position of the partition's subscriptions of each
-- namespace.
SELECT s.namespace, MIN(p.position)
FROM sluice_stream_progress AS p
JOIN sluice_stream_subscriptions AS s
  ON s.service = p.service AND s.provider = p.provider AND s.id = p.subscription_id
WHERE p.service = $1 AND p.provider = $2 AND p.partition = $3::integer
GROUP BY s.namespace;

-- name: DeleteExpiredParked
-- args: service, provider, partition, namespace, parked_before
DELETE FROM sluice_stream_parked
WHERE service = $1 AND provider = $2 AND partition = $3::integer AND namespace = $4
  AND parked_at < $5::bigint;

-- name: NamespaceBytes
-- args: service, provider, partition, after, through, namespaces
-- The payload bytes of each listed namespace's records in (after, through];
-- namespaces is a JSON array of strings.
SELECT namespace, SUM(octet_length(payload))::bigint
FROM sluice_records
WHERE service = $1 AND provider = $2 AND partition = $3::integer
  AND position > $4::bigint AND position <= $5::bigint
  AND namespace IN (SELECT json_array_elements_text($6::json))
GROUP BY namespace;

-- name: TrimCandidates
-- args: service, provider, partition, after, through, limit
-- The first records after the trimmed position, oldest first, without
-- their payloads.
SELECT position, namespace, appended_at, octet_length(payload)::bigint
FROM sluice_records
WHERE service = $1 AND provider = $2 AND partition = $3::integer
  AND position > $4::bigint AND position <= $5::bigint
ORDER BY position
LIMIT $6;

-- name: BenchCreateTable
-- The raw-insert benchmark's table: what the database does with no sluice
-- code in the path.
CREATE TABLE IF NOT EXISTS sluice_bench_raw (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload  BYTEA NOT NULL
);

-- name: BenchInsert
-- args: payload
-- One row: raw-insert's single-row transaction and raw-insert-naive's
-- statement a row (more rows go in by COPY).
INSERT INTO sluice_bench_raw (payload) VALUES ($1);

-- name: BenchDropTable
DROP TABLE IF EXISTS sluice_bench_raw;

-- name: UpsertNode
-- args: service, provider, id, address, timeout_ms, node_group, consumers
-- Registers a node on its first heartbeat, records the next ones.
INSERT INTO sluice_nodes (service, provider, id, address, started_at, heartbeat_at, timeout_ms, node_group, consumers)
VALUES ($1, $2, $3, $4, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, $5, $6, $7)
ON CONFLICT (service, provider, id) DO UPDATE
SET address = EXCLUDED.address, timeout_ms = EXCLUDED.timeout_ms, node_group = EXCLUDED.node_group, consumers = EXCLUDED.consumers,
    heartbeat_at = GREATEST(sluice_nodes.heartbeat_at, EXCLUDED.heartbeat_at);

-- name: DeleteForgottenNodes
-- args: service, provider, forget_ms
DELETE FROM sluice_nodes
WHERE service = $1 AND provider = $2 AND heartbeat_at < floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - $3::bigint;

-- name: SelectNodes
-- args: service, provider
SELECT id, address, started_at, heartbeat_at, timeout_ms, node_group, consumers, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM sluice_nodes
WHERE service = $1 AND provider = $2
ORDER BY id;

-- name: DeleteNode
-- args: service, provider, id
DELETE FROM sluice_nodes WHERE service = $1 AND provider = $2 AND id = $3;

-- name: SelectLeases
-- args: service, provider
SELECT l.node_group, l.partition, l.owner, l.epoch, l.lease_until, COALESCE(c.checkpoint, 0), l.cache_windows, l.cache_records,
       floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM sluice_partition_leases l
LEFT JOIN sluice_partition_checkpoints c ON c.service = l.service AND c.provider = l.provider AND c.partition = l.partition
WHERE l.service = $1 AND l.provider = $2
ORDER BY l.node_group, l.partition;

-- name: EnsurePartitionLease
-- args: service, provider, partition, node_group
-- A partition never leased in the group gets a row with no owner and
-- epoch 0.
INSERT INTO sluice_partition_leases (service, provider, partition, node_group, owner, epoch, lease_until, updated_at)
VALUES ($1, $2, $3::integer, $4, '', 0, 0, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
ON CONFLICT DO NOTHING;

-- name: RenewLease
-- args: duration_ms, cache_windows, cache_records, service, provider, partition, owner, epoch, node_group
-- Extends a lease its owner still holds under its epoch (also one that
-- ended: nobody acquired it since, or the epoch would have moved), with
-- what the owner's cache of the partition holds.
UPDATE sluice_partition_leases
SET lease_until = GREATEST(lease_until + 1, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + $1::bigint),
    cache_windows = $2::integer, cache_records = $3::bigint, updated_at = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE service = $4 AND provider = $5 AND node_group = $9 AND partition = $6::integer AND owner = $7 AND epoch = $8::bigint;

-- name: AcquireLease
-- args: owner, duration_ms, service, provider, partition, node_group
-- Takes a partition whose lease ended (or that was released, or never
-- leased: lease_until 0) under a new epoch, its new owner's cache
-- empty until it renews.
UPDATE sluice_partition_leases
SET owner = $1, epoch = epoch + 1, lease_until = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + $2::bigint,
    cache_windows = 0, cache_records = 0, updated_at = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE service = $3 AND provider = $4 AND node_group = $6 AND partition = $5::integer AND lease_until < floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;

-- name: ReleaseLease
-- args: service, provider, partition, owner, epoch, node_group
UPDATE sluice_partition_leases
SET owner = '', lease_until = 0, cache_windows = 0, cache_records = 0, updated_at = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE service = $1 AND provider = $2 AND node_group = $6 AND partition = $3::integer AND owner = $4 AND epoch = $5::bigint;

-- name: LockLeaseNoWait
-- args: service, provider, partition, node_group
-- Locks a partition's lease row unless another transaction holds it
-- (then fails at once: lock_not_available).
SELECT epoch FROM sluice_partition_leases
WHERE service = $1 AND provider = $2 AND node_group = $4 AND partition = $3::integer
FOR UPDATE NOWAIT;

-- name: LockLeaseEpoch
-- args: service, provider, partition, node_group
-- A partition's epoch, its lease row locked until commit: a fenced write
-- (a save, a park, a fault) checks it under the lock.
SELECT epoch FROM sluice_partition_leases
WHERE service = $1 AND provider = $2 AND node_group = $4 AND partition = $3::integer
FOR UPDATE;

-- name: SelectSubscriptionProgress
-- args: service, provider, subscription_id
-- A subscription's stored position on each partition it covers.
SELECT partition, position
FROM sluice_stream_progress
WHERE service = $1 AND provider = $2 AND subscription_id = $3
ORDER BY partition;

-- name: SetSubscriptionProgress
-- args: position, service, provider, partition, subscription_id
UPDATE sluice_stream_progress SET position = $1::bigint, updated_at = floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE service = $2 AND provider = $3 AND partition = $4::integer AND subscription_id = $5;

-- name: RecordReposition
-- args: reposition_json, service, provider, id
-- Counts and records a reposition, and clears the subscription's fault.
-- The reposition's time is the database's.
UPDATE sluice_stream_subscriptions
SET repositions = repositions + 1,
    repositioned = jsonb_set($1::jsonb, '{at}', to_jsonb(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint))::text,
    fault = NULL, faulted_at = NULL
WHERE service = $2 AND provider = $3 AND id = $4;

-- name: GetReposition
-- args: service, provider, id
SELECT repositions, repositioned FROM sluice_stream_subscriptions
WHERE service = $1 AND provider = $2 AND id = $3;

-- name: InsertBody
-- args: service, provider, payload
-- Stores a body that the copies of one message share; returns its id.
INSERT INTO sluice_bodies (service, provider, payload) VALUES ($1, $2, $3)
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
WHERE x.service = $1 AND x.provider = $2 AND x.id > $3
ORDER BY x.id
LIMIT $4;

-- name: DeleteBodies
-- args: service, provider, ids
DELETE FROM sluice_bodies
WHERE (service, provider, id) IN (SELECT $1::text, $2::text, unnest($3::bigint[]));

-- name: MarkHandled
-- args: service, provider, subscription, partition, position
-- Records that a transactional handler handled an event, in the
-- caller's transaction; no row is affected if it was recorded already
-- (a transaction recording it concurrently is waited for).
INSERT INTO sluice_stream_handled (service, provider, subscription_id, partition, position)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING;

-- name: SelectSubscriptionPosition
-- args: service, provider, partition, subscription
SELECT position FROM sluice_stream_progress
WHERE service = $1 AND provider = $2 AND partition = $3 AND subscription_id = $4;

-- name: ForgetHandled
-- args: service, provider, subscription, partition, through
DELETE FROM sluice_stream_handled
WHERE service = $1 AND provider = $2 AND subscription_id = $3 AND partition = $4 AND position <= $5;

-- name: DeleteSubscriptionHandled
-- args: service, provider, id
DELETE FROM sluice_stream_handled WHERE service = $1 AND provider = $2 AND subscription_id = $3;
