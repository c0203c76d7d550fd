-- sluice schema, MySQL/MariaDB dialect, version 6: cancelling scheduled
-- messages sent to a topic or a forwarding queue.
--
-- Such a message is stored as copies in other queues (a topic's
-- subscriptions, or where a queue forwards it), yet its sender knows it
-- by one number, taken from the counter of the queue it was sent to. Until
-- its scheduled time (visible_at), one row maps that number to each copy
-- (copy_queue, copy_seq), and one more, with an empty copy_queue and
-- copy_seq 0, records the send itself, so that a send no subscription
-- took can be cancelled too. Rows whose time has come are deleted by the
-- next routed schedule of the queue, or with the queue.
--
-- As in the earlier versions, the file can run again after a start that
-- died part way: the table, with its index, is created only when missing.
-- The primary key is 100 + 100 + 260 + 8 + 260 + 8 bytes, well within
-- InnoDB's 3072.
CREATE TABLE IF NOT EXISTS sluice_routed_schedules (
    service     VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider    VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    queue       VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq         BIGINT   NOT NULL,
    copy_queue  VARCHAR(260) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    copy_seq    BIGINT   NOT NULL,
    visible_at  BIGINT   NOT NULL,
    PRIMARY KEY (service, provider, queue, seq, copy_queue, copy_seq),
    -- A queue's rows in time order, for deleting those whose time has come.
    INDEX sluice_routed_schedules_due (service, provider, queue, visible_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
