-- sluice schema, SQLite dialect, version 7: the stream runtime.

-- The number of stream partitions of a tenant, recorded on first use: a
-- node configured with another number refuses to start, since streams
-- would hash onto other partitions.
CREATE TABLE sluice_stream_config (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    partitions  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider)
) WITHOUT ROWID;

-- One row per partition that was ever owned: the owner, its epoch (one
-- more at each acquisition; progress written under an older one is
-- refused), and the checkpoint: every subscription is done with the
-- partition's records at or below it. The row is also the partition's
-- retention lock: creating a subscription and trimming take it.
CREATE TABLE sluice_partition_owners (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    owner       TEXT    NOT NULL,
    epoch       INTEGER NOT NULL,
    checkpoint  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition)
) WITHOUT ROWID;

-- Subscriptions: of a consumer to one stream (stream_key set, partition
-- the stream's), or to every stream of a namespace (stream_key '',
-- partition -1). fault says why one stopped.
CREATE TABLE sluice_stream_subscriptions (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    consumer    TEXT    NOT NULL,
    namespace   TEXT    NOT NULL,
    stream_key  TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    fault       TEXT,
    faulted_at  INTEGER,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, id)
) WITHOUT ROWID;

CREATE INDEX sluice_stream_subscriptions_stream ON sluice_stream_subscriptions (service, provider, namespace, stream_key);
CREATE INDEX sluice_stream_subscriptions_partition ON sluice_stream_subscriptions (service, provider, partition);

-- Each subscription's position on each partition it reads: it is done
-- with every record at or below it.
CREATE TABLE sluice_stream_progress (
    service          TEXT    NOT NULL,
    provider         TEXT    NOT NULL,
    partition        INTEGER NOT NULL,
    subscription_id  TEXT    NOT NULL,
    position         INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition, subscription_id)
) WITHOUT ROWID;

-- Events a subscription gave up on, with a copy of the record (retention
-- may delete it from the log) and the last error.
CREATE TABLE sluice_stream_parked (
    service          TEXT    NOT NULL,
    provider         TEXT    NOT NULL,
    subscription_id  TEXT    NOT NULL,
    partition        INTEGER NOT NULL,
    position         INTEGER NOT NULL,
    namespace        TEXT    NOT NULL,
    stream_key       TEXT    NOT NULL,
    properties       TEXT,
    payload          BLOB    NOT NULL,
    appended_at      INTEGER NOT NULL,
    error            TEXT    NOT NULL,
    attempts         INTEGER NOT NULL,
    parked_at        INTEGER NOT NULL,
    PRIMARY KEY (service, provider, subscription_id, partition, position)
);

-- How long a namespace's consumed records stay; no row: until consumed.
CREATE TABLE sluice_stream_retention (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    namespace   TEXT    NOT NULL,
    max_age_ms  INTEGER NOT NULL,
    max_bytes   INTEGER NOT NULL,
    PRIMARY KEY (service, provider, namespace)
) WITHOUT ROWID;
