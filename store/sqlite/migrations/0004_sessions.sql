-- sluice schema, SQLite dialect, version 4: sessions.

-- Fixed when the queue is created: every message carries a session id and
-- is received only under its session's lock.
ALTER TABLE sluice_queues ADD COLUMN requires_session INTEGER NOT NULL DEFAULT 0;

-- One row per session of a queue that requires sessions: its lock (token,
-- and when it ends; 0 when free), its state, and whether a message of it
-- may be available (active). Accepting the next session walks
-- sluice_sessions_free over active sessions whose lock has ended, so
-- locked sessions are never read.
CREATE TABLE sluice_sessions (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    session_id  TEXT    NOT NULL,
    active      INTEGER NOT NULL DEFAULT 1,
    lock_token  INTEGER,
    lock_until  INTEGER NOT NULL DEFAULT 0,
    state       BLOB,
    PRIMARY KEY (service, provider, queue, session_id)
) WITHOUT ROWID;

CREATE INDEX sluice_sessions_free ON sluice_sessions (service, provider, queue, active, lock_until);

-- A session's messages in sequence order, by state: a session's lease
-- reads its own ready messages only.
CREATE INDEX sluice_messages_session ON sluice_messages (service, provider, queue, session_id, state, seq)
    WHERE session_id IS NOT NULL;
