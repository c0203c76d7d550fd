-- sluice schema, PostgreSQL dialect, version 1.
-- Times are BIGINT milliseconds since the Unix epoch, taken from the
-- database clock. Every table leads with the tenant columns (service,
-- provider) so that deployments and named providers sharing one database
-- never touch each other's rows. The tables live in the schema that the
-- connection's search_path names (Config.Schema), so several independent
-- sluice deployments can share one database as well.

-- One row per queue: its settings, the last sequence number handed out
-- (the row is locked while a batch takes numbers, so numbers are gap-free
-- and in commit order) and the control column evict_at, the next time a
-- lease may win the race to run an eviction batch.
CREATE TABLE sluice_queues (
    service              TEXT     NOT NULL,
    provider             TEXT     NOT NULL,
    name                 TEXT     NOT NULL,
    last_seq             BIGINT   NOT NULL DEFAULT 0,
    max_delivery         INTEGER  NOT NULL,
    default_ttl_ms       BIGINT   NOT NULL,
    dead_letter_expired  SMALLINT NOT NULL,
    dead_retention_ms    BIGINT   NOT NULL,
    evict_interval_ms    BIGINT   NOT NULL,
    evict_batch          INTEGER  NOT NULL,
    evict_at             BIGINT   NOT NULL,
    created_at           BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, name)
);

-- Messages waiting, scheduled, leased or deferred.
-- state: 0 ready, 1 leased, 2 scheduled, 3 deferred.
-- visible_at: for leased and scheduled rows, when they become ready again;
-- NULL for ready and deferred rows.
CREATE TABLE sluice_messages (
    service         TEXT     NOT NULL,
    provider        TEXT     NOT NULL,
    queue           TEXT     NOT NULL,
    seq             BIGINT   NOT NULL,
    state           SMALLINT NOT NULL,
    visible_at      BIGINT,
    expires_at      BIGINT,
    delivery_count  INTEGER  NOT NULL DEFAULT 0,
    lock_token      BIGINT,
    enqueued_at     BIGINT   NOT NULL,
    message_id      TEXT,
    session_id      TEXT,
    partition_key   TEXT,
    content_type    TEXT,
    properties      TEXT,
    payload         BYTEA    NOT NULL,
    PRIMARY KEY (service, provider, queue, seq)
);

-- Leasing walks only ready rows, in sequence order: the index holds ready
-- rows alone, so in-flight, scheduled and deferred rows are not in it at
-- all and a lease costs O(log K + B) whatever the backlog of leased rows.
-- (A partial index where SQLite uses (.., state, seq): the same range
-- scan, and leased rows cost this index nothing.)
CREATE INDEX sluice_messages_ready ON sluice_messages (service, provider, queue, seq)
    WHERE state = 0;
-- Every lease and settle leaves a dead row version whose ready-index entry
-- later leases must step over until vacuum removes it (measured: 50,000
-- fresh dead entries add about 1 ms to a lease of 32). A queue table
-- churns, so vacuum it after 1,000 dead rows plus 2% instead of the
-- default 50 plus 20%.
ALTER TABLE sluice_messages SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0.02);
-- Rows whose lease or schedule ends, in time order.
CREATE INDEX sluice_messages_due ON sluice_messages (service, provider, queue, visible_at)
    WHERE visible_at IS NOT NULL;
-- Rows with a time-to-live, for eviction.
CREATE INDEX sluice_messages_expiry ON sluice_messages (service, provider, queue, expires_at)
    WHERE expires_at IS NOT NULL;

-- Dead letters keep the message's columns and say why and when.
CREATE TABLE sluice_dead_letters (
    service         TEXT     NOT NULL,
    provider        TEXT     NOT NULL,
    queue           TEXT     NOT NULL,
    seq             BIGINT   NOT NULL,
    delivery_count  INTEGER  NOT NULL,
    enqueued_at     BIGINT   NOT NULL,
    expires_at      BIGINT,
    message_id      TEXT,
    session_id      TEXT,
    partition_key   TEXT,
    content_type    TEXT,
    properties      TEXT,
    payload         BYTEA    NOT NULL,
    reason          TEXT     NOT NULL,
    description     TEXT     NOT NULL,
    dead_at         BIGINT   NOT NULL,
    remove_at       BIGINT,
    PRIMARY KEY (service, provider, queue, seq)
);

CREATE INDEX sluice_dead_letters_removal ON sluice_dead_letters (service, provider, queue, remove_at)
    WHERE remove_at IS NOT NULL;

-- One row per partition log: the last position handed out (locked while a
-- batch takes positions, so positions are gap-free and in commit order)
-- and the position through which retention trimmed it.
CREATE TABLE sluice_partitions (
    service     TEXT     NOT NULL,
    provider    TEXT     NOT NULL,
    partition   INTEGER  NOT NULL,
    head        BIGINT   NOT NULL,
    trimmed     BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (service, provider, partition)
);

CREATE TABLE sluice_records (
    service      TEXT     NOT NULL,
    provider     TEXT     NOT NULL,
    partition    INTEGER  NOT NULL,
    position     BIGINT   NOT NULL,
    namespace    TEXT     NOT NULL,
    stream_key   TEXT     NOT NULL,
    properties   TEXT,
    payload      BYTEA    NOT NULL,
    appended_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, partition, position)
);

-- A consumer's position on a partition, written only by the holder of the
-- newest epoch.
CREATE TABLE sluice_checkpoints (
    service     TEXT     NOT NULL,
    provider    TEXT     NOT NULL,
    partition   INTEGER  NOT NULL,
    consumer    TEXT     NOT NULL,
    position    BIGINT   NOT NULL,
    epoch       BIGINT   NOT NULL,
    updated_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, partition, consumer)
);
