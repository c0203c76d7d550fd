-- sluice schema, SQLite dialect, version 3: duplicate detection.

-- The window in milliseconds; 0 turns duplicate detection off.
ALTER TABLE sluice_queues ADD COLUMN dedup_window_ms INTEGER NOT NULL DEFAULT 0;

-- One row per message id (with partition key) a queue with duplicate
-- detection accepted, kept until expires_at: the first message's sequence
-- number, returned to every duplicate send.
CREATE TABLE sluice_dedup (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    dedup_key   TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, queue, dedup_key)
) WITHOUT ROWID;

CREATE INDEX sluice_dedup_expiry ON sluice_dedup (service, provider, queue, expires_at);
