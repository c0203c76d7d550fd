-- sluice schema, PostgreSQL dialect, version 4: sessions.
-- (Adding a column with a constant default rewrites no rows.)

-- Fixed when the queue is created: every message carries a session id and
-- is received only under its session's lock.
ALTER TABLE sluice_queues ADD COLUMN requires_session SMALLINT NOT NULL DEFAULT 0;

-- One row per session of a queue that requires sessions: its lock (token,
-- and when it ends; 0 when free), its state, and whether a message of it
-- may be available (active). Accepting the next session walks
-- sluice_sessions_free over active sessions whose lock has ended, so
-- locked sessions are never read.
CREATE TABLE sluice_sessions (
    service     TEXT     NOT NULL,
    provider    TEXT     NOT NULL,
    queue       TEXT     NOT NULL,
    session_id  TEXT     NOT NULL,
    active      SMALLINT NOT NULL DEFAULT 1,
    lock_token  BIGINT,
    lock_until  BIGINT   NOT NULL DEFAULT 0,
    state       BYTEA,
    PRIMARY KEY (service, provider, queue, session_id)
);

-- Active sessions in order of the end of their locks. (A partial index
-- where SQLite uses (.., active, lock_until): the same range scan, inactive
-- sessions cost it nothing, and only a query that names active = 1 can
-- use it, so the lookups of one session by its key always take the
-- primary key: with (.., active, lock_until), a plan made from statistics
-- that undercount the table (as before the first ANALYZE) reads every
-- session of the queue in it to find one.)
CREATE INDEX sluice_sessions_free ON sluice_sessions (service, provider, queue, lock_until)
    WHERE active = 1;
-- Every accept, renew and release writes a new version of the session's
-- row and, lock_until being indexed, a new entry in sluice_sessions_free
-- (so no update of the lock is HOT, and a fillfactor would gain nothing).
-- The old entry of a session whose lock ends is in the range that
-- accepting the next session walks (lock_until <= now) until vacuum
-- removes it: vacuum after 50 dead rows plus 2%, not 20%.
ALTER TABLE sluice_sessions SET (autovacuum_vacuum_scale_factor = 0.02);

-- A session's messages in sequence order, by state: a session's lease
-- reads its own ready messages only, and renewing or releasing a session
-- its own leased ones.
CREATE INDEX sluice_messages_session ON sluice_messages (service, provider, queue, session_id, state, seq)
    WHERE session_id IS NOT NULL;
