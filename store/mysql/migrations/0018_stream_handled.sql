-- sluice schema, MySQL/MariaDB dialect, version 18: the events a
-- transactional stream handler (StreamProcessor.HandleTx) handled.
--
-- A row is written in the application's transaction with the handler's
-- effects: it commits with them, or not at all. A delivery that finds
-- its row skips the handler (its effects are already in). Rows at or
-- below the subscription's stored position are never consulted again
-- (the subscription resumes after it) and are deleted as handlers go on.
-- The primary key is 100 + 100 + 260 + 4 + 8 bytes.
CREATE TABLE IF NOT EXISTS sluice_stream_handled (
    service          VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider         VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subscription_id  VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    `partition`      INT      NOT NULL,
    position         BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, subscription_id, `partition`, position)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
