-- sluice schema, PostgreSQL dialect, version 18: the events a
-- transactional stream handler (StreamProcessor.HandleTx) handled.
--
-- A row is written in the application's transaction with the handler's
-- effects: it commits with them, or not at all. A delivery that finds
-- its row skips the handler (its effects are already in). Rows at or
-- below the subscription's stored position are never consulted again
-- (the subscription resumes after it) and are deleted as handlers go on.
CREATE TABLE sluice_stream_handled (
    service          TEXT     NOT NULL,
    provider         TEXT     NOT NULL,
    subscription_id  TEXT     NOT NULL,
    partition        INTEGER  NOT NULL,
    position         BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, subscription_id, partition, position)
);
