-- sluice queries, MySQL/MariaDB dialect (MariaDB 10.6+, MySQL 8+).
--
-- Each query starts with a "-- name: Name" line. The engine passes the
-- arguments listed under the name, in that order. MySQL's '?' placeholders
-- are strictly positional: each argument is consumed once, where its '?'
-- stands in the text, so every query below is written with its '?' in the
-- order of its "args" line (a derived table, a column list or the join
-- order is arranged to make it so).
--
-- A list argument is a JSON array of integers, read with
-- JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')). Bulk rows are a JSON
-- array of objects, payloads hex-encoded; JSON_TABLE yields NULL for a
-- missing key, which is how omitted fields become NULL columns.
--
-- Statements that take a list lock exactly the rows it names, and find
-- each by primary key. They start from a one-row derived table k holding
-- the scalar arguments (names converted to the key columns' ascii_bin, so
-- that they compare as constants of the key), then the list, then the
-- table, joined in that order (STRAIGHT_JOIN): one eq_ref lookup per list
-- element. Written as "seq IN (SELECT ... JSON_TABLE ...)", the optimizer
-- may instead scan the whole queue and probe the list, locking every row
-- of the queue until commit, so that other consumers of the queue skip
-- them all; and MariaDB before 11.1 runs such a subquery once per row of a
-- single-table UPDATE or DELETE.
--
-- Statements that pick rows by a range of times (due, expired, removable)
-- read their candidates without locks first, then lock those by primary
-- key with SKIP LOCKED and keep the ones unchanged. A locking scan of the
-- range in index order (ORDER BY ... LIMIT) also locks the first row past
-- its end, which is often another queue's, and InnoDB keeps that lock
-- until commit even at READ COMMITTED: that queue's leasers would skip the
-- row. Equality scans (the ready index, a queue's dead letters) stop
-- before the next key and need none of this.
--
-- Times are milliseconds since the Unix epoch by the database clock:
-- CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED); the session time zone is
-- UTC. Transactions run at READ COMMITTED: locking reads (FOR UPDATE) see
-- the latest committed rows, and rows a locking read examines but does not
-- return are unlocked at once. Queue workers take rows with SKIP LOCKED, so
-- they never wait for each other; settles lock their rows with FOR UPDATE.

-- name: CreateMigrationsTable
CREATE TABLE IF NOT EXISTS sluice_migrations (
    version     BIGINT NOT NULL PRIMARY KEY,
    applied_at  BIGINT NOT NULL
) ENGINE = InnoDB;

-- name: MigrateLock
-- A named lock held by the migrating connection (the engine runs the
-- migration on one connection); it is released if that connection dies.
SELECT GET_LOCK('sluice_migrate', 60);

-- name: MigrateUnlock
SELECT RELEASE_LOCK('sluice_migrate');

-- name: MigrateAbort
SELECT RELEASE_LOCK('sluice_migrate');

-- name: AppliedMigrations
SELECT version FROM sluice_migrations ORDER BY version;

-- name: RecordMigration
-- args: version
INSERT INTO sluice_migrations (version, applied_at)
VALUES (?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: Now
SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: CreateQueue
-- args: service, provider, name, max_delivery, default_ttl_ms,
--       dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch,
--       attributes, dedup_window_ms, requires_session
INSERT INTO sluice_queues (service, provider, name, last_seq, max_delivery, default_ttl_ms,
    dead_letter_expired, dead_retention_ms, evict_interval_ms, evict_batch, attributes,
    dedup_window_ms, requires_session, evict_at, created_at)
VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?,
    CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
    CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: GetQueue
-- args: service, provider, name
-- The queue's settings, counters, the database's current time, the
-- earliest end of a lease or schedule (NULL: none), read from the first
-- entry of the due index, so that a lease skips SelectDue when nothing is
-- due, the duplicate detection window, and whether the queue requires
-- sessions.
SELECT max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, evict_at, last_seq,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
       (SELECT m.visible_at FROM sluice_messages AS m
        WHERE m.service = q.service AND m.provider = q.provider AND m.queue = q.name
          AND m.visible_at IS NOT NULL
        ORDER BY m.visible_at LIMIT 1),
       dedup_window_ms, requires_session
FROM sluice_queues AS q
WHERE service = ? AND provider = ? AND name = ?;

-- name: GetQueueAttributes
-- args: service, provider, name
SELECT attributes FROM sluice_queues
WHERE service = ? AND provider = ? AND name = ?;

-- name: UpdateQueue
-- args: max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
--       evict_interval_ms, evict_batch, attributes, dedup_window_ms, service,
--       provider, name
-- The connection reports changed rows (clientFoundRows off): an update to
-- the values the queue has reports 0, and the engine then checks that the
-- queue exists.
UPDATE sluice_queues
SET max_delivery = ?, default_ttl_ms = ?, dead_letter_expired = ?, dead_retention_ms = ?,
    evict_interval_ms = ?, evict_batch = ?, attributes = ?, dedup_window_ms = ?
WHERE service = ? AND provider = ? AND name = ?;

-- name: ListQueues
-- args: service, provider, after, from, to, limit
-- A range of the primary key, in name order (ascii_bin: byte order):
-- names after "after" in [from, to), a prefix's range.
SELECT name, max_delivery, default_ttl_ms, dead_letter_expired, dead_retention_ms,
       evict_interval_ms, evict_batch, attributes, dedup_window_ms, requires_session
FROM sluice_queues
WHERE service = ? AND provider = ? AND name > ? AND name >= ? AND name < ?
ORDER BY name
LIMIT ?;

-- name: DeleteQueue
-- args: service, provider, name
DELETE FROM sluice_queues WHERE service = ? AND provider = ? AND name = ?;

-- name: DeleteQueueMessages
-- args: service, provider, name
DELETE FROM sluice_messages WHERE service = ? AND provider = ? AND queue = ?;

-- name: DeleteQueueSessions
-- args: service, provider, name
DELETE FROM sluice_sessions WHERE service = ? AND provider = ? AND queue = ?;

-- name: ActivateSessions
-- args: service, provider, queue, seqs
-- The sessions of the given messages may have messages available: mark
-- them active, creating their rows. Each message is found by primary key,
-- as in the list statements above. The session id is taken as VARBINARY,
-- the type of the sessions' column: DISTINCT on the messages' utf8mb4_bin
-- column would take 's' and 's ' for one session (PAD SPACE).
INSERT INTO sluice_sessions (service, provider, queue, session_id, active)
SELECT DISTINCT m.service, m.provider, m.queue, CAST(m.session_id AS BINARY), 1
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
WHERE m.session_id IS NOT NULL
ON DUPLICATE KEY UPDATE active = 1;

-- name: SelectSessionCandidates
-- args: service, provider, queue, now, limit
-- Active sessions whose lock has ended, longest free first, locked until
-- the accept commits; sessions another accept holds are skipped. The
-- candidates come from a plain read of the free index (active = 1 and
-- lock_until <= now: locked and inactive sessions are outside the range),
-- then only they are locked, by primary key, and kept if still free, as
-- in SelectDue. (A locking scan of the range holds the entry past its end
-- until commit: a held session's, or the first of the next queue's, whose
-- acceptors would skip it.) The plain read takes up to 256 candidates, not
-- limit: the sessions that concurrent accepts hold are among the oldest
-- free ones the read sees, and are skipped; 256 leaves limit free ones
-- when 15 other accepts (a pool's connections) each hold 16. The join
-- has no ORDER BY, so that it stops after limit locked rows (a sort would
-- lock every candidate first); it returns them in the read's order.
SELECT s.session_id
FROM (SELECT service, provider, queue, session_id, lock_until
      FROM sluice_sessions FORCE INDEX (sluice_sessions_free)
      WHERE service = ? AND provider = ? AND queue = ? AND active = 1 AND lock_until <= ?
      ORDER BY lock_until
      LIMIT 256) AS c
STRAIGHT_JOIN sluice_sessions AS s
    ON s.service = c.service AND s.provider = c.provider AND s.queue = c.queue
   AND s.session_id = c.session_id
WHERE s.active = 1 AND s.lock_until <= c.lock_until
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: HasReadySessionMessage
-- args: service, provider, queue, session_id, now
-- A plain read of the session index. The session id is compared as
-- VARBINARY, byte for byte: the messages' utf8mb4_bin column pads with
-- spaces (PAD SPACE), so "session_id = ?" would also match a session
-- whose id differs only in trailing spaces. With the binary string on the
-- argument's side the comparison still looks the key up in the index.
SELECT 1
FROM sluice_messages FORCE INDEX (sluice_messages_session)
WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY)
  AND state = 0 AND (expires_at IS NULL OR expires_at > ?)
LIMIT 1;

-- name: DeactivateSession
-- args: service, provider, queue, session_id
UPDATE sluice_sessions SET active = 0
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ?;

-- name: SelectIdleSessions
-- args: service, provider, queue, now, limit
-- Sessions an accept found empty, with no lock and no state: candidates
-- for deletion by eviction (a plain read; DeleteIdleSession checks again
-- under the row lock).
SELECT session_id
FROM sluice_sessions
WHERE service = ? AND provider = ? AND queue = ? AND active = 0 AND lock_until <= ?
  AND state IS NULL
LIMIT ?;

-- name: DeleteIdleSession
-- args: service, provider, queue, session_id, now, service, provider, queue, session_id
-- Deletes a session row that is still idle and has no message at all.
DELETE FROM sluice_sessions
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ?
  AND active = 0 AND lock_until <= ? AND state IS NULL
  AND NOT EXISTS (SELECT 1 FROM sluice_messages FORCE INDEX (sluice_messages_session)
                  WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY));

-- name: EnsureSession
-- args: service, provider, queue, session_id
-- Creates an inactive session row unless there is one; the update is a
-- no-op (INSERT IGNORE would also hide other errors).
INSERT INTO sluice_sessions (service, provider, queue, session_id, active)
VALUES (?, ?, ?, ?, 0)
ON DUPLICATE KEY UPDATE active = active;

-- name: LockSession
-- args: lock_token, lock_until, service, provider, queue, session_id, now
-- Locks a session whose lock has ended; changes nothing if it is held.
-- The connection reports changed rows, and a lock always sets a new token:
-- 1 when it locked.
UPDATE sluice_sessions SET lock_token = ?, lock_until = ?
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ? AND lock_until <= ?;

-- name: SelectSessionLock
-- args: service, provider, queue, session_id
-- The session's lock, with its row locked until the caller commits.
SELECT lock_token, lock_until
FROM sluice_sessions
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ?
FOR UPDATE;

-- name: SelectSessionReady
-- args: service, provider, queue, session_id, now, limit
-- A session's first ready, unexpired messages in sequence order, with all
-- columns, locked until the lease commits: a walk of the session index
-- from (session, state 0) in seq order, the session id compared as in
-- HasReadySessionMessage. An equality scan stops before the next key, so
-- it locks no row past its range. A row another transaction holds is
-- waited for, not skipped: a session's messages go out in order. (A join
-- with a one-row derived table of the arguments, as the list statements
-- use, makes MariaDB sort: it would read and lock every ready message of
-- the session.)
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages FORCE INDEX (sluice_messages_session)
WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY)
  AND state = 0 AND (expires_at IS NULL OR expires_at > ?)
ORDER BY seq
LIMIT ?
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
-- A plain read, the session id compared as in HasReadySessionMessage.
-- Two branches, each cheap on its own index, and no index is forced: in
-- the first the optimizer weighs, by index dives, the session index's
-- ranges for states 1 and 2 against the due index's range (rows due and
-- not resolved yet, usually few just after resolveDue) and reads the
-- smaller; the second reads the session index's range for state 2 (the
-- session's scheduled rows).
SELECT MIN(seq) FROM (
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY)
    AND (state = 1 OR state = 2 AND delivery_count > 0) AND visible_at <= ?
  UNION ALL
  SELECT MIN(seq) AS seq
  FROM sluice_messages
  WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY)
    AND state = 2 AND delivery_count > 0 AND deferred = 0 AND visible_at > ?
) AS firsts;

-- name: RenewSession
-- args: lock_until, service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_until = ?
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ? AND lock_token = ?;

-- name: ExtendSessionMessages
-- args: visible_at, service, provider, queue, session_id, lock_token
-- The messages a session's holder has leased: their locks end with the
-- session's. An equality scan of the session index over (session, state
-- 1), the session id compared as in HasReadySessionMessage; the token,
-- new with every lock, picks the holder's messages.
UPDATE sluice_messages FORCE INDEX (sluice_messages_session) SET visible_at = ?
WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY) AND state = 1
  AND lock_token = ?;

-- name: ReleaseSession
-- args: service, provider, queue, session_id, lock_token
UPDATE sluice_sessions SET lock_token = NULL, lock_until = 0, active = 1
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ? AND lock_token = ?;

-- name: ReleaseSessionMessages
-- args: service, provider, queue, session_id, lock_token
-- The messages a releasing holder had leased become available (or
-- deferred) again, their delivery given back: a release is not a
-- delivery; found as in ExtendSessionMessages.
UPDATE sluice_messages FORCE INDEX (sluice_messages_session)
SET state = CASE WHEN deferred = 1 THEN 3 ELSE 0 END, visible_at = NULL, lock_token = NULL,
    delivery_count = CASE WHEN delivery_count > 0 THEN delivery_count - 1 ELSE 0 END
WHERE service = ? AND provider = ? AND queue = ? AND session_id = CAST(? AS BINARY) AND state = 1
  AND lock_token = ?;

-- name: GetSessionState
-- args: service, provider, queue, session_id
SELECT state FROM sluice_sessions
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ?;

-- name: SetSessionState
-- args: state, service, provider, queue, session_id
UPDATE sluice_sessions SET state = ?
WHERE service = ? AND provider = ? AND queue = ? AND session_id = ?;

-- name: DeleteQueueDedup
-- args: service, provider, name
DELETE FROM sluice_dedup WHERE service = ? AND provider = ? AND queue = ?;

-- name: LockQueue
-- args: service, provider, name
-- Locks the queue's counter row until commit and returns last_seq: an
-- enqueue to a queue with duplicate detection holds it while it reads and
-- records ids, so groups of the queue check ids one after the other.
SELECT last_seq FROM sluice_queues
WHERE service = ? AND provider = ? AND name = ?
FOR UPDATE;

-- name: SelectDedup
-- args: service, provider, queue, now, keys
-- Of the given ids (a JSON array of strings), those accepted within the
-- window, with the sequence number they were accepted as: one primary key
-- lookup per id, as the list statements above do. A plain read: the
-- caller holds the queue's row (LockQueue), as does every enqueue that
-- records ids of the queue (eviction only deletes ids whose window
-- ended), so a read at READ COMMITTED sees every live id. The ids are read
-- as VARBINARY, the type of dedup_key.
SELECT d.dedup_key, d.seq
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (dedup_key VARBINARY(530) PATH '$')) AS l
STRAIGHT_JOIN sluice_dedup AS d
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue
   AND d.dedup_key = l.dedup_key
WHERE d.expires_at > k.now;

-- name: UpsertDedup
-- args: service, provider, queue, rows
-- rows: [{"k":key,"s":seq,"e":expires_at}]; an expired row of the same key
-- (not yet trimmed) is replaced.
INSERT INTO sluice_dedup (service, provider, queue, dedup_key, seq, expires_at)
SELECT ?, ?, ?, r.k, r.s, r.e
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    k VARBINARY(530) PATH '$.k',
    s BIGINT PATH '$.s',
    e BIGINT PATH '$.e')) AS r
ON DUPLICATE KEY UPDATE seq = VALUES(seq), expires_at = VALUES(expires_at);

-- name: TrimDedup
-- args: service, provider, queue, now, limit
-- Ids whose window ended, oldest first: candidates from the expiry index
-- (forced: the walk stops after limit entries), then deleted by primary
-- key if unchanged. A single-table DELETE ... ORDER BY expires_at LIMIT
-- takes no index hint, and when most of the queue's ids have expired
-- MariaDB scans the primary key range and sorts instead: it reads every
-- id of the queue and keeps every expired one locked until commit,
-- however small the limit. (The candidate read of a DELETE is a locking
-- read: with fewer than limit expired ids, the first entry past the range
-- stays share-locked until commit, which delays only a write of that one
-- id: an enqueue sending it again after its window, or another trim.)
DELETE d
FROM (SELECT service, provider, queue, dedup_key, expires_at
      FROM sluice_dedup FORCE INDEX (sluice_dedup_expiry)
      WHERE service = ? AND provider = ? AND queue = ? AND expires_at <= ?
      ORDER BY expires_at
      LIMIT ?) AS c
STRAIGHT_JOIN sluice_dedup AS d
    ON d.service = c.service AND d.provider = c.provider AND d.queue = c.queue
   AND d.dedup_key = c.dedup_key
WHERE d.expires_at = c.expires_at;

-- name: DeleteQueueDeadLetters
-- args: service, provider, name
DELETE FROM sluice_dead_letters WHERE service = ? AND provider = ? AND queue = ?;

-- name: ReserveSeqs
-- args: n, service, provider, name
-- The new last_seq comes back as the statement's last insert id:
-- LAST_INSERT_ID(expr) sets it, and MySQL has no UPDATE ... RETURNING.
UPDATE sluice_queues SET last_seq = LAST_INSERT_ID(last_seq + ?)
WHERE service = ? AND provider = ? AND name = ?;

-- name: InsertMessages
-- args: service, provider, queue, enqueued_at, rows
-- rows: [{"s":seq,"st":state,"v":visible_at,"e":expires_at,"mid":..,"sid":..,
--         "pk":..,"ct":..,"pr":properties_json,"hd":headers_json,"p":payload_hex,"b":body_id}]
-- "pr" and "hd" are JSON strings holding the properties' and headers' JSON
-- text, read as text.
INSERT INTO sluice_messages (service, provider, queue, enqueued_at, seq, state, visible_at,
    expires_at, delivery_count, lock_token, message_id, session_id, partition_key,
    content_type, properties, payload, body_id, headers)
SELECT ?, ?, ?, ?, r.s, r.st, r.v, r.e, 0, NULL, r.mid, r.sid, r.pk, r.ct, r.pr, UNHEX(r.p), r.b, r.hd
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    s   BIGINT PATH '$.s',
    st  SMALLINT PATH '$.st',
    v   BIGINT PATH '$.v',
    e   BIGINT PATH '$.e',
    mid VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.mid',
    sid VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.sid',
    pk  VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.pk',
    ct  VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.ct',
    pr  MEDIUMTEXT CHARACTER SET utf8mb4 PATH '$.pr',
    hd  MEDIUMTEXT CHARACTER SET utf8mb4 PATH '$.hd',
    p   LONGTEXT CHARACTER SET ascii PATH '$.p',
    b   BIGINT PATH '$.b')) AS r;

-- name: SelectDue
-- args: service, provider, queue, now, limit
-- Leased and scheduled rows whose time has come, oldest first. Rows
-- another transaction holds are skipped. The candidates come from a plain
-- read of the due index (visible_at <= now leaves out the NULLs of ready
-- and deferred rows); only they are then locked, by primary key, and kept
-- if unchanged. (A locking range scan in index order would also lock the
-- first row past the range, often another queue's, until commit, and make
-- that queue's leasers skip it.)
SELECT m.seq, m.state, m.delivery_count, m.expires_at, m.deferred, m.visible_at, m.message_id,
       m.partition_key
FROM (SELECT service, provider, queue, seq, visible_at
      FROM sluice_messages
      WHERE service = ? AND provider = ? AND queue = ?
        AND visible_at IS NOT NULL AND visible_at <= ?
      ORDER BY visible_at
      LIMIT ?) AS c
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = c.service AND m.provider = c.provider AND m.queue = c.queue AND m.seq = c.seq
WHERE m.visible_at = c.visible_at
FOR UPDATE SKIP LOCKED;

-- name: MakeReady
-- args: service, provider, queue, seqs
-- Ready again, or deferred again for a message that was deferred.
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.state = CASE WHEN m.deferred = 1 THEN 3 ELSE 0 END, m.visible_at = NULL, m.lock_token = NULL;

-- name: ReleaseMessages
-- args: service, provider, queue, seqs
-- As MakeReady, giving back the delivery the lease counted: a release is
-- not a delivery.
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.state = CASE WHEN m.deferred = 1 THEN 3 ELSE 0 END, m.visible_at = NULL, m.lock_token = NULL,
    m.delivery_count = CASE WHEN m.delivery_count > 0 THEN m.delivery_count - 1 ELSE 0 END;

-- name: MakeDeferred
-- args: service, provider, queue, seqs
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.state = 3, m.deferred = 1, m.visible_at = NULL, m.lock_token = NULL;

-- name: SetProperties
-- args: properties, service, provider, queue, seqs
-- properties: the JSON text, or NULL for none.
UPDATE (SELECT CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS properties,
             CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.properties = k.properties;

-- name: SelectDeferred
-- args: service, provider, queue, seqs
-- Of the given rows, the deferred ones, with all columns (a deferred
-- message never expires), locked until the lease commits. A row another
-- transaction holds is waited for, then read as committed.
SELECT m.seq, m.state, m.visible_at, m.expires_at, m.delivery_count, m.enqueued_at,
       m.message_id, m.session_id, m.partition_key, m.content_type, m.properties, CASE WHEN m.body_id IS NULL THEN m.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = m.service AND b.provider = m.provider AND b.id = m.body_id) END AS payload,
       m.headers
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
WHERE m.state = 3
ORDER BY m.seq
FOR UPDATE;

-- name: SelectScheduled
-- args: service, provider, queue, now, seqs
-- Of the given rows, those scheduled for later that were never delivered,
-- locked until the cancel commits.
SELECT m.seq
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
WHERE m.state = 2 AND m.delivery_count = 0 AND m.visible_at > k.now
ORDER BY m.seq
FOR UPDATE;

-- name: MakeScheduled
-- args: visible_at, service, provider, queue, seqs
UPDATE (SELECT CAST(? AS SIGNED) AS visible_at,
             CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.state = 2, m.visible_at = k.visible_at, m.lock_token = NULL;

-- name: ExtendLeases
-- args: visible_at, service, provider, queue, seqs
UPDATE (SELECT CAST(? AS SIGNED) AS visible_at,
             CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.visible_at = k.visible_at;

-- name: MoveToDeadLetters
-- args: reason, description, dead_at, remove_at, service, provider, queue, seqs
INSERT INTO sluice_dead_letters (reason, description, dead_at, remove_at,
    service, provider, queue, seq, delivery_count, enqueued_at, expires_at, message_id,
    session_id, partition_key, content_type, properties, payload, body_id, headers)
SELECT ?, ?, ?, ?,
       m.service, m.provider, m.queue, m.seq, m.delivery_count, m.enqueued_at, m.expires_at,
       m.message_id, m.session_id, m.partition_key, m.content_type, m.properties, m.payload, m.body_id,
       m.headers
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq;

-- name: DeleteMessages
-- args: service, provider, queue, seqs
DELETE m
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq;

-- name: InsertRoutedSchedules
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"q":copy_queue,"c":copy_seq,"v":visible_at}], distinct.
INSERT INTO sluice_routed_schedules (service, provider, queue, seq, copy_queue, copy_seq, visible_at)
SELECT ?, ?, ?, r.s, r.q, r.c, r.v
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    s BIGINT PATH '$.s',
    q VARCHAR(260) CHARACTER SET ascii PATH '$.q',
    c BIGINT PATH '$.c',
    v BIGINT PATH '$.v')) AS r;

-- name: DeleteDueRoutedSchedules
-- args: service, provider, queue, now
-- The rows of sends whose time has come: their copies are no longer
-- scheduled. The caller holds the queue's counter row, so no other
-- routed schedule of the queue deletes them at the same time.
DELETE FROM sluice_routed_schedules
WHERE service = ? AND provider = ? AND queue = ? AND visible_at <= ?;

-- name: SelectRoutedSchedules
-- args: service, provider, queue, now, seqs
-- Of the given numbers, those of routed sends whose time has not come,
-- locked, so that two cancels of one send take turns.
SELECT r.seq
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_routed_schedules AS r
    ON r.service = k.service AND r.provider = k.provider AND r.queue = k.queue AND r.seq = l.seq
   AND r.copy_queue = '' AND r.copy_seq = 0
WHERE r.visible_at > k.now
ORDER BY r.seq
FOR UPDATE;

-- name: SelectRoutedCopies
-- args: service, provider, queue, seqs
-- The copies of the given routed sends, by queue.
SELECT r.copy_queue, r.copy_seq
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_routed_schedules AS r
    ON r.service = k.service AND r.provider = k.provider AND r.queue = k.queue AND r.seq = l.seq
WHERE r.copy_queue <> ''
ORDER BY r.copy_queue, r.copy_seq;

-- name: DeleteRoutedSchedules
-- args: service, provider, queue, seqs
DELETE r
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_routed_schedules AS r
    ON r.service = k.service AND r.provider = k.provider AND r.queue = k.queue AND r.seq = l.seq;

-- name: DeleteQueueRoutedSchedules
-- args: service, provider, name
DELETE FROM sluice_routed_schedules WHERE service = ? AND provider = ? AND queue = ?;

-- name: TryLockQueue
-- args: service, provider, name
-- Locks the queue's counter row until commit, unless another transaction
-- holds it (no row then): a lease that activates scheduled messages takes
-- their new numbers under it, and never waits.
SELECT last_seq FROM sluice_queues
WHERE service = ? AND provider = ? AND name = ?
FOR UPDATE SKIP LOCKED;

-- name: ActivateScheduled
-- args: service, provider, queue, mapping, enqueued_at
-- mapping: [{"o":old_seq,"n":new_seq}]. Scheduled messages whose time came
-- are appended as if enqueued now: ready, under new numbers (each found by
-- primary key, as in MakeReady).
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (o BIGINT PATH '$.o', n BIGINT PATH '$.n')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.o
SET m.seq = l.n, m.state = 0, m.visible_at = NULL, m.lock_token = NULL, m.enqueued_at = ?;

-- name: RenumberDedup
-- args: service, provider, queue, rows
-- rows: [{"k":dedup_key,"o":old_seq,"n":new_seq}]: the ids of activated
-- messages name their new numbers.
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (dk VARBINARY(530) PATH '$.k', o BIGINT PATH '$.o', n BIGINT PATH '$.n')) AS r
STRAIGHT_JOIN sluice_dedup AS d
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.dedup_key = r.dk
SET d.seq = r.n
WHERE d.seq = r.o;

-- name: SelectReady
-- args: service, provider, queue, now, limit
-- The first ready, unexpired rows in sequence order, with all columns: a
-- walk of the ready index from (queue, state 0) in seq order. Rows another
-- transaction holds (a leaser that took them and has not committed) are
-- skipped. The index is forced: with ORDER BY seq ... LIMIT, MariaDB
-- otherwise prefers the primary key and walks every leased row first.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers
FROM sluice_messages FORCE INDEX (sluice_messages_ready)
WHERE service = ? AND provider = ? AND queue = ? AND state = 0
  AND (expires_at IS NULL OR expires_at > ?)
ORDER BY seq
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: LeaseMessages
-- args: service, provider, queue, rows
-- rows: [{"s":seq,"t":lock_token,"u":visible_at}], one per message; the
-- messages of one lease request share a token.
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    seq   BIGINT PATH '$.s',
    token BIGINT PATH '$.t',
    until BIGINT PATH '$.u')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
SET m.state = 1, m.lock_token = l.token, m.visible_at = l.until,
    m.delivery_count = m.delivery_count + 1;

-- name: SelectHeld
-- args: service, provider, queue, now, seqs
-- Of the given rows, those under a lease that has not ended, locked until
-- the settle commits.
SELECT m.seq, m.lock_token, m.delivery_count
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
WHERE m.state = 1 AND m.visible_at > k.now
ORDER BY m.seq
FOR UPDATE;

-- name: ClaimEviction
-- args: next_evict_at, service, provider, name, seen_evict_at
-- Compare-and-set on the control column: the one caller that moves it runs
-- the eviction batch. The connection reports changed rows, not matched
-- ones (clientFoundRows off), so only the caller that moved it sees 1.
UPDATE sluice_queues SET evict_at = ?
WHERE service = ? AND provider = ? AND name = ? AND evict_at = ?;

-- name: SelectExpired
-- args: service, provider, queue, now, now, limit
-- Rows whose time-to-live ran out, except those under a lease that has not
-- ended (their holder may still complete them) and deferred ones (which
-- never expire: their owner holds their numbers): candidates from a plain
-- read of the expiry index, then locked by primary key as in SelectDue.
SELECT m.seq
FROM (SELECT service, provider, queue, seq, state, visible_at, expires_at
      FROM sluice_messages
      WHERE service = ? AND provider = ? AND queue = ?
        AND expires_at IS NOT NULL AND expires_at <= ?
        AND (state <> 1 OR visible_at <= ?) AND deferred = 0
      ORDER BY expires_at
      LIMIT ?) AS c
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = c.service AND m.provider = c.provider AND m.queue = c.queue AND m.seq = c.seq
WHERE m.state = c.state AND m.visible_at <=> c.visible_at AND m.expires_at = c.expires_at
  AND m.deferred = 0
FOR UPDATE SKIP LOCKED;

-- name: SelectRemovableDeadLetters
-- args: service, provider, queue, now, limit
-- Candidates from a plain read of the removal index, then locked by
-- primary key as in SelectDue.
SELECT d.seq
FROM (SELECT service, provider, queue, seq
      FROM sluice_dead_letters
      WHERE service = ? AND provider = ? AND queue = ?
        AND remove_at IS NOT NULL AND remove_at <= ?
      ORDER BY remove_at
      LIMIT ?) AS c
STRAIGHT_JOIN sluice_dead_letters AS d
    ON d.service = c.service AND d.provider = c.provider AND d.queue = c.queue AND d.seq = c.seq
FOR UPDATE SKIP LOCKED;

-- name: SelectDeadLetterSeqs
-- args: service, provider, queue, limit
SELECT seq
FROM sluice_dead_letters
WHERE service = ? AND provider = ? AND queue = ?
ORDER BY seq
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: LockDeadLetters
-- args: service, provider, queue, seqs
SELECT d.seq
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
ORDER BY d.seq
FOR UPDATE;

-- name: DeleteDeadLetters
-- args: service, provider, queue, seqs
DELETE d
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq;

-- name: ResubmitDeadLetters
-- args: enqueued_at, expires_at, mapping, service, provider, queue
-- mapping: [{"o":old_seq,"n":new_seq}]
INSERT INTO sluice_messages (enqueued_at, expires_at, service, provider, queue, seq, state,
    visible_at, delivery_count, lock_token, message_id, session_id, partition_key,
    content_type, properties, payload, body_id, headers)
SELECT ?, ?, d.service, d.provider, d.queue, m.n, 0,
       NULL, 0, NULL, d.message_id, d.session_id, d.partition_key,
       d.content_type, d.properties, d.payload, d.body_id, d.headers
FROM JSON_TABLE(?, '$[*]' COLUMNS (o BIGINT PATH '$.o', n BIGINT PATH '$.n')) AS m
JOIN sluice_dead_letters AS d ON d.seq = m.o
WHERE d.service = ? AND d.provider = ? AND d.queue = ?;

-- name: PeekMessages
-- args: service, provider, queue, from_seq, limit
-- The last column, deferred, tells where a row whose lease or schedule
-- ended goes next (Peek reports its state as of now).
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, CASE WHEN sluice_messages.body_id IS NULL THEN sluice_messages.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_messages.service AND b.provider = sluice_messages.provider AND b.id = sluice_messages.body_id) END AS payload, headers, deferred
FROM sluice_messages
WHERE service = ? AND provider = ? AND queue = ? AND seq >= ?
ORDER BY seq
LIMIT ?;

-- name: PeekDeadLetters
-- args: service, provider, queue, from_seq, limit
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ? AND provider = ? AND queue = ? AND seq >= ?
ORDER BY seq
LIMIT ?;

-- name: ScanMessages
-- args: service, provider, queue, from_seq, limit
-- PeekMessages without the bodies: what a browse examines.
SELECT seq, state, visible_at, expires_at, delivery_count, enqueued_at,
       message_id, session_id, partition_key, content_type, properties, NULL AS payload, headers, deferred
FROM sluice_messages
WHERE service = ? AND provider = ? AND queue = ? AND seq >= ?
ORDER BY seq
LIMIT ?;

-- name: PeekMessagesBySeqs
-- args: service, provider, queue, seqs
-- The columns of PeekMessages, of the rows named.
SELECT m.seq, m.state, m.visible_at, m.expires_at, m.delivery_count, m.enqueued_at,
       m.message_id, m.session_id, m.partition_key, m.content_type, m.properties, CASE WHEN m.body_id IS NULL THEN m.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = m.service AND b.provider = m.provider AND b.id = m.body_id) END AS payload, m.headers, m.deferred
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
ORDER BY m.seq;

-- name: ScanDeadLetters
-- args: service, provider, queue, from_seq, limit
-- PeekDeadLetters without the bodies.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, NULL AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters
WHERE service = ? AND provider = ? AND queue = ? AND seq >= ?
ORDER BY seq
LIMIT ?;

-- name: PeekDeadLettersBySeqs
-- args: service, provider, queue, seqs
SELECT d.seq, d.delivery_count, d.enqueued_at, d.expires_at, d.message_id, d.session_id, d.partition_key,
       d.content_type, d.properties, CASE WHEN d.body_id IS NULL THEN d.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = d.service AND b.provider = d.provider AND b.id = d.body_id) END AS payload, d.reason, d.description, d.dead_at, d.remove_at, d.headers
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
ORDER BY d.seq;

-- name: SelectUnlocked
-- args: service, provider, queue, now, before, limit
-- The oldest messages no lock holds (a lease that has not ended),
-- enqueued before before, for a batch delete.
SELECT seq
FROM sluice_messages
WHERE service = ? AND provider = ? AND queue = ?
  AND NOT (state = 1 AND visible_at > ?) AND enqueued_at < ?
ORDER BY seq
LIMIT ?;

-- name: DeleteUnlocked
-- args: service, provider, queue, now, seqs
-- Deletes the rows named that no lock holds; the delete reads the rows
-- as committed, so a lease that commits first is seen.
DELETE m
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_messages AS m
    ON m.service = k.service AND m.provider = k.provider AND m.queue = k.queue AND m.seq = l.seq
WHERE NOT (m.state = 1 AND m.visible_at > k.now);

-- name: SelectDeadLetterReady
-- args: service, provider, queue, now, limit
-- A queue's first dead letters that no one holds, with the columns of
-- PeekDeadLetters, locked until the lease commits; rows another receiver
-- is taking are skipped, so two receivers never take the same dead
-- letter. A walk of the queue's primary key range in seq order (forced:
-- the removal index and a sort would lock every dead letter the scan
-- reads), passing over the held ones (dead letters are few and rarely
-- received). An equality scan stops before the next key, so it locks no
-- row past its range, and a held row it passes over fails the filter and
-- is unlocked at once.
SELECT seq, delivery_count, enqueued_at, expires_at, message_id, session_id, partition_key,
       content_type, properties, CASE WHEN sluice_dead_letters.body_id IS NULL THEN sluice_dead_letters.payload ELSE (SELECT b.payload FROM sluice_bodies AS b WHERE b.service = sluice_dead_letters.service AND b.provider = sluice_dead_letters.provider AND b.id = sluice_dead_letters.body_id) END AS payload, reason, description, dead_at, remove_at, headers
FROM sluice_dead_letters FORCE INDEX (PRIMARY)
WHERE service = ? AND provider = ? AND queue = ? AND locked_until <= ?
ORDER BY seq
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: LockDeadLetterRows
-- args: lock_token, locked_until, service, provider, queue, seqs
-- The dead-letter list statements force the primary key: a queue has few
-- dead letters, and MariaDB, weighing the list (estimated at 40 rows)
-- against a queue of a few, reads the queue's whole range instead of
-- looking each element up (eq_ref), and locks every dead letter of the
-- queue, or waits for those another receiver holds. With the index
-- forced, a usable lookup rules the range scan out.
UPDATE (SELECT CAST(? AS SIGNED) AS lock_token,
             CAST(? AS SIGNED) AS locked_until,
             CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d FORCE INDEX (PRIMARY)
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
SET d.lock_token = k.lock_token, d.locked_until = k.locked_until;

-- name: SelectHeldDeadLetters
-- args: service, provider, queue, now, seqs
-- Of the given dead letters, those under a lock that has not ended,
-- locked until the settle commits; the index is forced as in
-- LockDeadLetterRows (with a join buffer, the rows of the queue that the
-- list does not name stay locked until commit). A named row that is not
-- held is unlocked at once, except, on MariaDB, the last one looked up,
-- which stays locked until commit, as in SelectHeld.
SELECT d.seq, d.lock_token
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue,
             CAST(? AS SIGNED) AS now) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d FORCE INDEX (PRIMARY)
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
WHERE d.locked_until > k.now
ORDER BY d.seq
FOR UPDATE;

-- name: UnlockDeadLetters
-- args: service, provider, queue, seqs
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d FORCE INDEX (PRIMARY)
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
SET d.lock_token = NULL, d.locked_until = 0;

-- name: ExtendDeadLetters
-- args: locked_until, service, provider, queue, seqs
UPDATE (SELECT CAST(? AS SIGNED) AS locked_until,
             CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS queue) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS l
STRAIGHT_JOIN sluice_dead_letters AS d FORCE INDEX (PRIMARY)
    ON d.service = k.service AND d.provider = k.provider AND d.queue = k.queue AND d.seq = l.seq
SET d.locked_until = k.locked_until;

-- name: QueueStats
-- args: now, now, now, now, service, provider, queue
-- A row whose lease or schedule ended counts where it goes next: active,
-- or deferred for a deferred message; an active one whose time-to-live
-- ran out counts as expired. (The four nows are one time: k.now serves.)
SELECT CAST(COALESCE(SUM(CASE WHEN (m.state = 0 OR (m.state IN (1, 2) AND m.visible_at <= k.now AND m.deferred = 0))
                              AND (m.expires_at IS NULL OR m.expires_at > k.now) THEN 1 ELSE 0 END), 0) AS SIGNED),
       CAST(COALESCE(SUM(CASE WHEN (m.state = 0 OR (m.state IN (1, 2) AND m.visible_at <= k.now AND m.deferred = 0))
                              AND m.expires_at <= k.now THEN 1 ELSE 0 END), 0) AS SIGNED),
       CAST(COALESCE(SUM(CASE WHEN m.state = 2 AND m.visible_at > k.now THEN 1 ELSE 0 END), 0) AS SIGNED),
       CAST(COALESCE(SUM(CASE WHEN m.state = 1 AND m.visible_at > k.now THEN 1 ELSE 0 END), 0) AS SIGNED),
       CAST(COALESCE(SUM(CASE WHEN m.state = 3 OR (m.state IN (1, 2) AND m.visible_at <= k.now AND m.deferred = 1) THEN 1 ELSE 0 END), 0) AS SIGNED),
       MIN(CASE WHEN (m.state = 0 OR (m.state IN (1, 2) AND m.visible_at <= k.now AND m.deferred = 0))
                 AND (m.expires_at IS NULL OR m.expires_at > k.now) THEN m.enqueued_at END),
       MIN(CASE WHEN m.state = 3 OR (m.state IN (1, 2) AND m.visible_at <= k.now AND m.deferred = 1) THEN m.enqueued_at END)
FROM (SELECT CAST(? AS SIGNED) AS now, CAST(? AS SIGNED) AS now2, CAST(? AS SIGNED) AS now3, CAST(? AS SIGNED) AS now4) AS k
STRAIGHT_JOIN sluice_messages AS m
WHERE m.service = ? AND m.provider = ? AND m.queue = ?;

-- name: CountDeadLetters
-- args: service, provider, queue
SELECT COUNT(*) FROM sluice_dead_letters
WHERE service = ? AND provider = ? AND queue = ?;

-- name: CountDeadLettersByReason
-- args: service, provider, queue
SELECT reason, COUNT(*) FROM sluice_dead_letters
WHERE service = ? AND provider = ? AND queue = ?
GROUP BY reason;

-- name: BumpHead
-- args: n, service, provider, partition
UPDATE sluice_partitions SET head = head + ?
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: EnsurePartition
-- args: service, provider, partition
INSERT IGNORE INTO sluice_partitions (service, provider, `partition`, head, trimmed)
VALUES (?, ?, ?, 0, 0);

-- name: GetPartition
-- args: service, provider, partition
SELECT head, trimmed, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sluice_partitions
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: InsertRecords
-- args: service, provider, partition, appended_at, rows
-- rows: [{"s":position,"ns":namespace,"k":key,"pr":properties_json,"p":payload_hex}]
INSERT INTO sluice_records (service, provider, `partition`, appended_at, position, namespace,
    stream_key, properties, payload)
SELECT ?, ?, ?, ?, r.s, r.ns, r.k, r.pr, UNHEX(r.p)
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    s   BIGINT PATH '$.s',
    ns  VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.ns',
    k   VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$.k',
    pr  MEDIUMTEXT CHARACTER SET utf8mb4 PATH '$.pr',
    p   LONGTEXT CHARACTER SET ascii PATH '$.p')) AS r;

-- name: ReadRecords
-- args: service, provider, partition, after, limit
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = ? AND provider = ? AND `partition` = ? AND position > ?
ORDER BY position
LIMIT ?;

-- name: ReadStreamRecords
-- args: service, provider, partition, namespace, stream_key, after, through, limit
-- One stream's records in (after, through], by sluice_records_stream: its
-- range starts at the first record after the given position of the
-- streams whose keys share the stream's first 512 characters (the index
-- holds that prefix), in position order; the full key is compared on the
-- rows found.
SELECT position, namespace, stream_key, properties, payload, appended_at
FROM sluice_records
WHERE service = ? AND provider = ? AND `partition` = ?
  AND namespace = ? AND stream_key = ? AND position > ? AND position <= ?
ORDER BY position
LIMIT ?;

-- name: DeleteRecordRange
-- args: service, provider, partition, after, through
-- A range of the log, in primary key order: TrimConsumed bounds its size.
DELETE FROM sluice_records
WHERE service = ? AND provider = ? AND `partition` = ? AND position > ? AND position <= ?;

-- name: SetTrimmed
-- args: through, service, provider, partition
UPDATE sluice_partitions SET trimmed = GREATEST(trimmed, LEAST(?, head))
WHERE service = ? AND provider = ? AND `partition` = ?;

-- Streams: partition count, owners, subscriptions, progress, parked
-- events and retention.
--
-- The connection reports changed rows, not matched ones (clientFoundRows
-- off): the updates whose count the engine reads (SaveCheckpoint,
-- SetSubscriptionFault; AcquirePartition does the same) always change the
-- row, by moving its updated_at forward by at least 1
-- (GREATEST(updated_at + 1, now)), so that they report 1 whenever they
-- match, even when they write the values the row holds, twice in one
-- millisecond.

-- name: GetStreamPartitions
-- args: service, provider
SELECT `partitions` FROM sluice_stream_config WHERE service = ? AND provider = ?;

-- name: InsertStreamPartitions
-- args: service, provider, partitions
-- Records the count unless there is one; the update is a no-op (INSERT
-- IGNORE would also hide other errors).
INSERT INTO sluice_stream_config (service, provider, `partitions`, created_at)
VALUES (?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
ON DUPLICATE KEY UPDATE `partitions` = `partitions`;

-- name: EnsurePartitionCheckpoint
-- args: service, provider, partition
-- A partition's checkpoint row, at 0, if it has none yet. The no-op
-- update takes the existing row's exclusive lock at once (INSERT IGNORE
-- would take a shared one, and two transactions upgrading theirs with
-- LockPartitionCheckpoint would deadlock).
INSERT INTO sluice_partition_checkpoints (service, provider, `partition`, checkpoint, updated_at)
VALUES (?, ?, ?, 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
ON DUPLICATE KEY UPDATE checkpoint = checkpoint;

-- name: LockPartitionCheckpoint
-- args: service, provider, partition
-- The partition's checkpoint row, locked until commit: the retention lock
-- that subscription creation, saves and trimming take.
SELECT checkpoint, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sluice_partition_checkpoints
WHERE service = ? AND provider = ? AND `partition` = ?
FOR UPDATE;

-- name: GetPartitionCheckpoint
-- args: service, provider, partition
SELECT checkpoint
FROM sluice_partition_checkpoints
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: SaveCheckpoint
-- args: checkpoint, service, provider, partition
-- The checkpoint never moves back. (The caller holds the lease row,
-- locked under its epoch.)
UPDATE sluice_partition_checkpoints
SET checkpoint = GREATEST(checkpoint, CAST(? AS SIGNED)), updated_at = GREATEST(updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: LowerCheckpoint
-- args: position, service, provider, partition
-- A subscription created behind the checkpoint takes it back with it.
UPDATE sluice_partition_checkpoints SET checkpoint = LEAST(checkpoint, CAST(? AS SIGNED))
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: InsertSubscription
-- args: service, provider, id, consumer, namespace, stream_key, partition
INSERT INTO sluice_stream_subscriptions (service, provider, id, consumer, namespace, stream_key,
    `partition`, fault, faulted_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL,
    CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
    CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: InsertProgress
-- args: service, provider, partition, subscription_id, position
INSERT INTO sluice_stream_progress (service, provider, `partition`, subscription_id, position, updated_at)
VALUES (?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: DeleteSubscription
-- args: service, provider, id
DELETE FROM sluice_stream_subscriptions WHERE service = ? AND provider = ? AND id = ?;

-- name: DeleteSubscriptionProgress
-- args: service, provider, id
-- The subscription's rows, found by the subscription index, forced (in
-- the multi-table form: a single-table DELETE takes no index hint): on a
-- small table MariaDB prefers the tenant's primary key range, and a
-- DELETE locks every row it reads, waiting for the progress of other
-- subscriptions that concurrent saves hold.
DELETE p
FROM sluice_stream_progress AS p FORCE INDEX (sluice_stream_progress_subscription)
WHERE p.service = ? AND p.provider = ? AND p.subscription_id = ?;

-- name: DeleteSubscriptionParked
-- args: service, provider, id
DELETE FROM sluice_stream_parked WHERE service = ? AND provider = ? AND subscription_id = ?;

-- name: SelectSubscriptions
-- args: service, provider, id, namespace, stream_key, by_partition, partition
-- id, namespace and stream_key select when not empty; by_partition (0 or
-- 1) selects the subscriptions that read a partition. Each argument is
-- used twice, so all come from a one-row derived table. The stream key
-- is compared byte for byte: utf8mb4_bin pads with spaces (PAD SPACE), so
-- "=" alone would take 'k' and 'k ' for one key, and ' ' for the empty
-- one; equal lengths rule both out.
SELECT s.id, s.consumer, s.namespace, s.stream_key, s.`partition`, s.fault, s.faulted_at, s.created_at,
       s.repositions, s.repositioned
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS id,
             CONVERT(? USING ascii) COLLATE ascii_bin AS namespace,
             CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS stream_key,
             CAST(? AS SIGNED) AS by_partition,
             CAST(? AS SIGNED) AS part) AS k
STRAIGHT_JOIN sluice_stream_subscriptions AS s
    ON s.service = k.service AND s.provider = k.provider
WHERE (k.id = '' OR s.id = k.id)
  AND (k.namespace = '' OR s.namespace = k.namespace)
  AND (LENGTH(k.stream_key) = 0
       OR (s.stream_key = k.stream_key AND LENGTH(s.stream_key) = LENGTH(k.stream_key)))
  AND (k.by_partition = 0 OR s.`partition` = k.part OR s.`partition` = -1)
ORDER BY s.id;

-- name: ListSubscriptions
-- args: service, provider, namespace, stream_key, stream_key_bytes, from, to, after_consumer, after_id, limit
-- The subscriptions to one stream (stream_key '': to the whole
-- namespace) whose consumers' names in lower case (consumer_lc) are in
-- [from, to), after (after_consumer, after_id), in that order: a range
-- of the index sluice_stream_subscriptions_consumer. The arguments are
-- placeholders, each used once, and the index is forced: from a derived
-- table, as other queries take arguments used twice, or left to choose,
-- MariaDB reads every row of the stream from the start of the index
-- (from is at least after_consumer, so the subscriptions of that
-- consumer up to after_id are all it reads of those before the page).
-- The key's length in bytes tells it from one that differs by trailing
-- spaces, which utf8mb4_bin (PAD SPACE) takes for equal.
SELECT id, consumer, namespace, stream_key, `partition`, fault, faulted_at, created_at, repositions, repositioned
FROM sluice_stream_subscriptions FORCE INDEX (sluice_stream_subscriptions_consumer)
WHERE service = ? AND provider = ? AND namespace = ? AND stream_key = ? AND LENGTH(stream_key) = ?
  AND consumer_lc >= ? AND consumer_lc < ?
  AND NOT (consumer_lc = ? AND id <= ?)
ORDER BY consumer_lc, id
LIMIT ?;

-- name: SetSubscriptionFault
-- args: service, provider, id, fault
-- An empty fault clears it. The fault is used twice, so the arguments
-- come from a one-row derived table; it is tested for emptiness by length
-- (' ' = '' under PAD SPACE). updated_at always changes (see above): 1
-- when the subscription exists.
UPDATE (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS id,
             CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS fault) AS k
STRAIGHT_JOIN sluice_stream_subscriptions AS s
    ON s.service = k.service AND s.provider = k.provider AND s.id = k.id
SET s.fault = IF(LENGTH(k.fault) = 0, NULL, k.fault),
    s.faulted_at = IF(LENGTH(k.fault) = 0, NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)),
    s.updated_at = GREATEST(s.updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: SelectProgress
-- args: service, provider, partition
-- Each subscription's position on the partition with its count of
-- repositions, in one statement (one snapshot): a reposition writes both
-- in one transaction, so a reader never takes its position for one saved
-- under the count before it.
SELECT p.subscription_id, p.position, s.repositions
FROM sluice_stream_progress AS p
STRAIGHT_JOIN sluice_stream_subscriptions AS s
    ON s.service = p.service AND s.provider = p.provider AND s.id = p.subscription_id
WHERE p.service = ? AND p.provider = ? AND p.`partition` = ?;

-- name: UpsertProgress
-- args: service, provider, partition, rows
-- rows: [{"id":subscription_id,"p":position}]. A subscription deleted
-- meanwhile gets no row back: each subscription row is looked up by
-- primary key and share-locked until commit (an INSERT ... SELECT at READ
-- COMMITTED otherwise reads it without a lock, and a deletion committing
-- between that read and this commit would leave a position behind, which
-- would hold retention back for good). A deletion waits for this commit
-- and then deletes the rows written here; one committed first is seen,
-- and its subscription skipped. Concurrent saves on other partitions
-- share the locks. (The locking clause also ends the join before ON
-- DUPLICATE KEY UPDATE: without one, MariaDB reads "ON DUPLICATE" as part
-- of the join's ON condition, and a WHERE clause would be needed.)
INSERT INTO sluice_stream_progress (service, provider, `partition`, subscription_id, position, updated_at)
SELECT k.service, k.provider, k.part, s.id, r.p, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CAST(? AS SIGNED) AS part) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    id VARCHAR(260) CHARACTER SET ascii PATH '$.id',
    p  BIGINT PATH '$.p',
    v  BIGINT PATH '$.v')) AS r
STRAIGHT_JOIN sluice_stream_subscriptions AS s
    ON s.service = k.service AND s.provider = k.provider AND s.id = r.id AND s.repositions = r.v
LOCK IN SHARE MODE
ON DUPLICATE KEY UPDATE position = VALUES(position), updated_at = VALUES(updated_at);

-- name: MinProgress
-- args: service, provider, partition
-- The lowest stored position of a subscription on the partition (NULL
-- when none reads it).
SELECT MIN(position)
FROM sluice_stream_progress
WHERE service = ? AND provider = ? AND `partition` = ?;

-- name: LockSubscription
-- args: service, provider, id
-- Whether a subscription exists, held until commit against its deletion.
SELECT 1 FROM sluice_stream_subscriptions WHERE service = ? AND provider = ? AND id = ?
LOCK IN SHARE MODE;

-- name: InsertParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position,"ns":namespace,"k":key,
--         "pr":properties_json,"p":payload_hex,"at":appended_at,
--         "e":error,"n":attempts}]; a row parked again is replaced (its
-- error, attempts and time). "pr" is a JSON string holding the
-- properties' JSON text, absent for none, read as in InsertRecords.
INSERT INTO sluice_stream_parked (service, provider, subscription_id, `partition`, position,
    namespace, stream_key, properties, payload, appended_at, error, attempts, parked_at)
SELECT ?, ?, ?, r.pa, r.po, r.ns, r.k, r.pr, UNHEX(r.p), r.ta, r.e, r.n,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM JSON_TABLE(?, '$[*]' COLUMNS (
    pa  INT PATH '$.pa',
    po  BIGINT PATH '$.po',
    ns  VARCHAR(260) CHARACTER SET utf8mb4 PATH '$.ns',
    k   VARCHAR(1024) CHARACTER SET utf8mb4 PATH '$.k',
    pr  MEDIUMTEXT CHARACTER SET utf8mb4 PATH '$.pr',
    p   LONGTEXT CHARACTER SET ascii PATH '$.p',
    ta  BIGINT PATH '$.at',
    e   TEXT CHARACTER SET utf8mb4 PATH '$.e',
    n   INT PATH '$.n')) AS r
ON DUPLICATE KEY UPDATE error = VALUES(error), attempts = VALUES(attempts),
    parked_at = VALUES(parked_at);

-- name: SelectParked
-- args: service, provider, subscription_id, after_partition, after_position, limit
-- A walk of the subscription's primary key range in (partition, position)
-- order from its start, past the rows at or before the bound, stopping
-- after limit rows: no sort. (With the bound written out as a range on
-- the partition, its arguments used twice from a one-row derived table,
-- MariaDB reads and sorts every parked event of the subscription.)
SELECT `partition`, position, namespace, stream_key, properties, payload, appended_at,
       error, attempts, parked_at
FROM sluice_stream_parked
WHERE service = ? AND provider = ? AND subscription_id = ?
  AND (`partition`, position) > (?, ?)
ORDER BY `partition`, position
LIMIT ?;

-- name: DeleteParked
-- args: service, provider, subscription_id, rows
-- rows: [{"pa":partition,"po":position}], distinct; each row is found by
-- primary key, as the list statements above do.
DELETE p
FROM (SELECT CONVERT(? USING ascii) COLLATE ascii_bin AS service,
             CONVERT(? USING ascii) COLLATE ascii_bin AS provider,
             CONVERT(? USING ascii) COLLATE ascii_bin AS subscription_id) AS k
STRAIGHT_JOIN JSON_TABLE(?, '$[*]' COLUMNS (
    pa INT PATH '$.pa',
    po BIGINT PATH '$.po')) AS l
STRAIGHT_JOIN sluice_stream_parked AS p
    ON p.service = k.service AND p.provider = k.provider AND p.subscription_id = k.subscription_id
   AND p.`partition` = l.pa AND p.position = l.po;

-- name: UpsertRetention
-- args: service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
INSERT INTO sluice_stream_retention (service, provider, namespace, max_age_ms, max_bytes, expiry_ms, parked_ms)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE max_age_ms = VALUES(max_age_ms), max_bytes = VALUES(max_bytes),
    expiry_ms = VALUES(expiry_ms), parked_ms = VALUES(parked_ms);

-- name: DeleteRetention
-- args: service, provider, namespace
DELETE FROM sluice_stream_retention WHERE service = ? AND provider = ? AND namespace = ?;

-- name: SelectRetentions
-- args: service, provider
SELECT namespace, max_age_ms, max_bytes, expiry_ms, parked_ms
FROM sluice_stream_retention
WHERE service = ? AND provider = ?;

-- name: MinProgressByNamespace
-- args: service, provider, partition
-- The lowest stored position of the partition's subscriptions of each
-- namespace.
SELECT s.namespace, MIN(p.position)
FROM sluice_stream_progress AS p
JOIN sluice_stream_subscriptions AS s
  ON s.service = p.service AND s.provider = p.provider AND s.id = p.subscription_id
WHERE p.service = ? AND p.provider = ? AND p.`partition` = ?
GROUP BY s.namespace;

-- name: DeleteExpiredParked
-- args: service, provider, partition, namespace, parked_before
DELETE FROM sluice_stream_parked
WHERE service = ? AND provider = ? AND `partition` = ? AND namespace = ?
  AND parked_at < ?;

-- name: NamespaceBytes
-- args: service, provider, partition, after, through, namespaces
-- The payload bytes of each listed namespace's records in (after,
-- through]; namespaces is a JSON array of strings. (The payloads are
-- read: InnoDB keeps no length apart from the value.)
SELECT namespace, CAST(SUM(LENGTH(payload)) AS SIGNED)
FROM sluice_records
WHERE service = ? AND provider = ? AND `partition` = ?
  AND position > ? AND position <= ?
  AND namespace IN (SELECT l.ns FROM JSON_TABLE(?, '$[*]' COLUMNS (
        ns VARCHAR(260) CHARACTER SET ascii PATH '$')) AS l)
GROUP BY namespace;

-- name: TrimCandidates
-- args: service, provider, partition, after, through, limit
-- The first records after the trimmed position, oldest first, with their
-- payloads' sizes.
SELECT position, namespace, appended_at, LENGTH(payload)
FROM sluice_records
WHERE service = ? AND provider = ? AND `partition` = ?
  AND position > ? AND position <= ?
ORDER BY position
LIMIT ?;

-- name: BenchCreateTable
-- The raw-insert benchmark's table: what the database does with no sluice
-- code in the path.
CREATE TABLE IF NOT EXISTS sluice_bench_raw (
    id       BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    payload  LONGBLOB NOT NULL
) ENGINE = InnoDB;

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
VALUES (?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), ?, ?, ?)
ON DUPLICATE KEY UPDATE address = VALUES(address), timeout_ms = VALUES(timeout_ms), node_group = VALUES(node_group), consumers = VALUES(consumers),
    heartbeat_at = GREATEST(heartbeat_at, VALUES(heartbeat_at));

-- name: DeleteForgottenNodes
-- args: service, provider, forget_ms
DELETE FROM sluice_nodes
WHERE service = ? AND provider = ? AND heartbeat_at < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ?;

-- name: SelectNodes
-- args: service, provider
SELECT id, address, started_at, heartbeat_at, timeout_ms, node_group, consumers, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sluice_nodes
WHERE service = ? AND provider = ?
ORDER BY id;

-- name: DeleteNode
-- args: service, provider, id
DELETE FROM sluice_nodes WHERE service = ? AND provider = ? AND id = ?;

-- name: SelectLeases
-- args: service, provider
SELECT l.node_group, l.`partition`, l.owner, l.epoch, l.lease_until, COALESCE(c.checkpoint, 0), l.cache_windows, l.cache_records,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sluice_partition_leases AS l
LEFT JOIN sluice_partition_checkpoints AS c ON c.service = l.service AND c.provider = l.provider AND c.`partition` = l.`partition`
WHERE l.service = ? AND l.provider = ?
ORDER BY l.node_group, l.`partition`;

-- name: EnsurePartitionLease
-- args: service, provider, partition, node_group
-- A partition never leased in the group gets a row with no owner and
-- epoch 0 (the no-op update takes an existing row's exclusive lock at
-- once, as in EnsurePartitionCheckpoint).
INSERT INTO sluice_partition_leases (service, provider, `partition`, node_group, owner, epoch, lease_until, updated_at)
VALUES (?, ?, ?, ?, '', 0, 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
ON DUPLICATE KEY UPDATE epoch = epoch;

-- name: RenewLease
-- args: duration_ms, cache_windows, cache_records, service, provider, partition, owner, epoch, node_group
-- Extends a lease its owner still holds under its epoch (also one that
-- ended: nobody acquired it since, or the epoch would have moved), with
-- what the owner's cache of the partition holds.
UPDATE sluice_partition_leases
SET lease_until = GREATEST(lease_until + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?),
    cache_windows = ?, cache_records = ?, updated_at = GREATEST(updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
WHERE service = ? AND provider = ? AND `partition` = ? AND owner = ? AND epoch = ? AND node_group = ?;

-- name: AcquireLease
-- args: owner, duration_ms, service, provider, partition, node_group
-- Takes a partition whose lease ended (or that was released, or never
-- leased: lease_until 0) under a new epoch, its new owner's cache
-- empty until it renews.
UPDATE sluice_partition_leases
SET owner = ?, epoch = epoch + 1, lease_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?,
    cache_windows = 0, cache_records = 0, updated_at = GREATEST(updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
WHERE service = ? AND provider = ? AND `partition` = ? AND node_group = ? AND lease_until < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: ReleaseLease
-- args: service, provider, partition, owner, epoch, node_group
UPDATE sluice_partition_leases
SET owner = '', lease_until = 0, cache_windows = 0, cache_records = 0, updated_at = GREATEST(updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
WHERE service = ? AND provider = ? AND `partition` = ? AND owner = ? AND epoch = ? AND node_group = ?;

-- name: LockLeaseNoWait
-- args: service, provider, partition, node_group
-- Locks a partition's lease row unless another transaction holds it
-- (then fails at once).
SELECT epoch FROM sluice_partition_leases
WHERE service = ? AND provider = ? AND `partition` = ? AND node_group = ?
FOR UPDATE NOWAIT;

-- name: LockLeaseEpoch
-- args: service, provider, partition, node_group
-- A partition's epoch, its lease row locked until commit: a fenced write
-- (a save, a park, a fault) checks it under the lock.
SELECT epoch FROM sluice_partition_leases
WHERE service = ? AND provider = ? AND `partition` = ? AND node_group = ?
FOR UPDATE;

-- name: SelectSubscriptionProgress
-- args: service, provider, subscription_id
-- A subscription's stored position on each partition it covers.
SELECT `partition`, position
FROM sluice_stream_progress
WHERE service = ? AND provider = ? AND subscription_id = ?
ORDER BY `partition`;

-- name: SetSubscriptionProgress
-- args: position, service, provider, partition, subscription_id
UPDATE sluice_stream_progress SET position = ?, updated_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE service = ? AND provider = ? AND `partition` = ? AND subscription_id = ?;

-- name: RecordReposition
-- args: reposition_json, service, provider, id
-- Counts and records a reposition, and clears the subscription's fault
-- (the count always changes: 1 when the subscription exists). The
-- reposition's time is the database's.
UPDATE sluice_stream_subscriptions
SET repositions = repositions + 1,
    repositioned = JSON_SET(?, '$.at', CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)),
    fault = NULL, faulted_at = NULL,
    updated_at = GREATEST(updated_at + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
WHERE service = ? AND provider = ? AND id = ?;

-- name: GetReposition
-- args: service, provider, id
SELECT repositions, repositioned FROM sluice_stream_subscriptions
WHERE service = ? AND provider = ? AND id = ?;

-- name: InsertBody
-- args: service, provider, payload
-- Stores a body that the copies of one message share; its id is
-- LAST_INSERT_ID.
INSERT INTO sluice_bodies (service, provider, payload) VALUES (?, ?, ?);

-- name: SelectBodies
-- args: service, provider, after, limit
-- The tenant's next bodies after id after, in id order, each with whether
-- no message or dead letter refers to it (orphan): a consistent read,
-- which locks nothing. Nothing refers to a body again once nothing does
-- (a reference is written with its body, in one transaction, or moved
-- between the two tables in one), so an orphan one read finds may be
-- deleted later.
SELECT x.id,
       NOT EXISTS (SELECT 1 FROM sluice_messages AS m
                   WHERE m.service = x.service AND m.provider = x.provider AND m.body_id = x.id)
       AND NOT EXISTS (SELECT 1 FROM sluice_dead_letters AS d
                       WHERE d.service = x.service AND d.provider = x.provider AND d.body_id = x.id)
       AS orphan
FROM sluice_bodies AS x
WHERE x.service = ? AND x.provider = ? AND x.id > ?
ORDER BY x.id
LIMIT ?;

-- name: DeleteBodies
-- args: service, provider, ids
DELETE FROM sluice_bodies
WHERE service = ? AND provider = ?
  AND id IN (SELECT l.id FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS l);

-- name: MarkHandled
-- args: service, provider, subscription, partition, position
-- Records that a transactional handler handled an event, in the
-- caller's transaction; no row is changed if it was recorded already (a
-- transaction recording it concurrently is waited for).
INSERT INTO sluice_stream_handled (service, provider, subscription_id, `partition`, position)
VALUES (?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE position = position;

-- name: SelectSubscriptionPosition
-- args: service, provider, partition, subscription
SELECT position FROM sluice_stream_progress
WHERE service = ? AND provider = ? AND `partition` = ? AND subscription_id = ?;

-- name: ForgetHandled
-- args: service, provider, subscription, partition, through
DELETE FROM sluice_stream_handled
WHERE service = ? AND provider = ? AND subscription_id = ? AND `partition` = ? AND position <= ?;

-- name: DeleteSubscriptionHandled
-- args: service, provider, id
DELETE FROM sluice_stream_handled WHERE service = ? AND provider = ? AND subscription_id = ?;
