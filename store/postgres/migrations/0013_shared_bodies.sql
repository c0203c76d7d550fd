-- sluice schema, PostgreSQL dialect, version 13: one stored body for the
-- copies of a large message.
--
-- A message sent to a topic is stored as a copy in each subscription it
-- reaches (and where those forward it). A large body is stored once: its
-- copies hold an empty payload and the id of a row of sluice_bodies
-- (body_id), and reads take the payload from there. A body no message or
-- dead letter refers to any more is deleted by a later eviction pass of
-- the tenant; the partial indexes below let that check look up the rows
-- that refer to a body without touching the rows that hold their own.
CREATE TABLE sluice_bodies (
    service     TEXT   NOT NULL,
    provider    TEXT   NOT NULL,
    id          BIGINT GENERATED ALWAYS AS IDENTITY,
    payload     BYTEA  NOT NULL,
    PRIMARY KEY (service, provider, id)
);

ALTER TABLE sluice_messages ADD COLUMN body_id BIGINT;
ALTER TABLE sluice_dead_letters ADD COLUMN body_id BIGINT;
CREATE INDEX sluice_messages_body ON sluice_messages (service, provider, body_id)
    WHERE body_id IS NOT NULL;
CREATE INDEX sluice_dead_letters_body ON sluice_dead_letters (service, provider, body_id)
    WHERE body_id IS NOT NULL;
