-- sluice schema, SQLite dialect, version 6: cancelling scheduled messages
-- sent to a topic or a forwarding queue.
--
-- Such a message is stored as copies in other queues (a topic's
-- subscriptions, or where a queue forwards it), yet its sender knows it
-- by one number, taken from the counter of the queue it was sent to. Until
-- its scheduled time (visible_at), one row maps that number to each copy
-- (copy_queue, copy_seq), and one more, with an empty copy_queue and
-- copy_seq 0, records the send itself, so that a send no subscription
-- took can be cancelled too. Rows whose time has come are deleted by the
-- next routed schedule of the queue, or with the queue.
CREATE TABLE sluice_routed_schedules (
    service     TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    copy_queue  TEXT    NOT NULL,
    copy_seq    INTEGER NOT NULL,
    visible_at  INTEGER NOT NULL,
    PRIMARY KEY (service, provider, queue, seq, copy_queue, copy_seq)
) WITHOUT ROWID;

-- A queue's rows in time order, for deleting those whose time has come.
CREATE INDEX sluice_routed_schedules_due ON sluice_routed_schedules (service, provider, queue, visible_at);
