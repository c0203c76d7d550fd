-- sluice schema, SQLite dialect, version 1.
-- Times are integer milliseconds since the Unix epoch, taken from the
-- database clock. Every table leads with the tenant columns (service,
-- provider) so that deployments and named providers sharing one file never
-- touch each other's rows.

-- One row per queue: its settings, the last sequence number handed out
-- (the row is locked while a batch takes numbers, so numbers are gap-free
-- and in commit order) and the control column evict_at, the next time a
-- lease may win the race to run an eviction batch.
CREATE TABLE sluice_queues (
    service              TEXT    NOT NULL,
    provider             TEXT    NOT NULL,
    name                 TEXT    NOT NULL,
    last_seq             INTEGER NOT NULL DEFAULT 0,
    max_delivery         INTEGER NOT NULL,
    default_ttl_ms       INTEGER NOT NULL,
    dead_letter_expired  INTEGER NOT NULL,
    dead_retention_ms    INTEGER NOT NULL,
    evict_interval_ms    INTEGER NOT NULL,
    evict_batch          INTEGER NOT NULL,
    evict_at             INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    PRIMARY KEY (service, provider, name)
) WITHOUT ROWID;

-- Messages waiting, scheduled, leased or deferred.
-- state: 0 ready, 1 leased, 2 scheduled, 3 deferred.
-- visible_at: for leased and scheduled rows, when they become ready again;
-- NULL for ready and deferred rows.
CREATE TABLE sluice_messages (
    service         TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    state           INTEGER NOT NULL,
    visible_at      INTEGER,
    expires_at      INTEGER,
    delivery_count  INTEGER NOT NULL DEFAULT 0,
    lock_token      INTEGER,
    enqueued_at     INTEGER NOT NULL,
    message_id      TEXT,
    session_id      TEXT,
    partition_key   TEXT,
    content_type    TEXT,
    properties      TEXT,
    payload         BLOB    NOT NULL,
    PRIMARY KEY (service, provider, queue, seq)
);

-- Leasing walks only ready rows, in sequence order: in-flight, scheduled
-- and deferred rows are outside the scanned range, so a lease costs
-- O(log K + B) whatever the backlog of leased rows.
CREATE INDEX sluice_messages_ready ON sluice_messages (service, provider, queue, state, seq);
-- Rows whose lease or schedule ends, in time order.
CREATE INDEX sluice_messages_due ON sluice_messages (service, provider, queue, visible_at)
    WHERE visible_at IS NOT NULL;
-- Rows with a time-to-live, for eviction.
CREATE INDEX sluice_messages_expiry ON sluice_messages (service, provider, queue, expires_at)
    WHERE expires_at IS NOT NULL;

-- Dead letters keep the message's columns and say why and when.
CREATE TABLE sluice_dead_letters (
    service         TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    delivery_count  INTEGER NOT NULL,
    enqueued_at     INTEGER NOT NULL,
    expires_at      INTEGER,
    message_id      TEXT,
    session_id      TEXT,
    partition_key   TEXT,
    content_type    TEXT,
    properties      TEXT,
    payload         BLOB    NOT NULL,
    reason          TEXT    NOT NULL,
    description     TEXT    NOT NULL,
    dead_at         INTEGER NOT NULL,
    remove_at       INTEGER,
    PRIMARY KEY (service, provider, queue, seq)
);

CREATE INDEX sluice_dead_letters_removal ON sluice_dead_letters (service, provider, queue, remove_at)
    WHERE remove_at IS NOT NULL;

-- One row per partition log: the last position handed out (locked while a
-- batch takes positions, so positions are gap-free and in commit order)
-- and the position through which retention trimmed it.
CREATE TABLE sluice_partitions (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    head        INTEGER NOT NULL,
    trimmed     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (service, provider, partition)
) WITHOUT ROWID;

CREATE TABLE sluice_records (
    service      TEXT    NOT NULL,
    provider     TEXT    NOT NULL,
    partition    INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    namespace    TEXT    NOT NULL,
    stream_key   TEXT    NOT NULL,
    properties   TEXT,
    payload      BLOB    NOT NULL,
    appended_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition, position)
);

-- A consumer's position on a partition, written only by the holder of the
-- newest epoch.
CREATE TABLE sluice_checkpoints (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    partition   INTEGER NOT NULL,
    consumer    TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    epoch       INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, partition, consumer)
) WITHOUT ROWID;
