-- sluice schema, PostgreSQL dialect, version 3: duplicate detection.
-- (Adding a column with a constant default rewrites no rows.)

-- The window in milliseconds; 0 turns duplicate detection off.
ALTER TABLE sluice_queues ADD COLUMN dedup_window_ms BIGINT NOT NULL DEFAULT 0;

-- One row per message id (with partition key) a queue with duplicate
-- detection accepted, kept until expires_at: the first message's sequence
-- number, returned to every duplicate send. Enqueues look ids up in the
-- primary key (SelectDedup); eviction trims expired rows in time order
-- (TrimDedup).
CREATE TABLE sluice_dedup (
    service     TEXT     NOT NULL,
    provider    TEXT     NOT NULL,
    queue       TEXT     NOT NULL,
    dedup_key   TEXT     NOT NULL,
    seq         BIGINT   NOT NULL,
    expires_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, queue, dedup_key)
);

-- Rows in time order, for TrimDedup. The predicate is always true (the
-- column is NOT NULL): it makes the index one that only a query naming
-- expires_at in its conditions may use, so that the id lookups of
-- SelectDedup, which test expiry behind a fence, never walk a queue's
-- rows in it instead of probing the primary key (as a plan made from
-- statistics that undercount the table otherwise does).
CREATE INDEX sluice_dedup_expiry ON sluice_dedup (service, provider, queue, expires_at)
    WHERE expires_at IS NOT NULL;
