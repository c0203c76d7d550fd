-- sluice schema, PostgreSQL dialect, version 20: ready floors.
--
-- A lease reads a queue's ready messages through sluice_messages_ready
-- in sequence order. Every message leased or settled leaves that index an
-- entry of its old row version, dead until vacuum removes it, and all of
-- them lie at the front of the queue's range: after a burst of 50,000
-- leases each later lease stepped over 344 index pages of them (about 2
-- ms, as long as the lease itself) until the next vacuum. A floor lets
-- the lease start past them.
--
-- A queue's floor is the least seq of its rows here (none: 0), and no
-- ready message of the queue is numbered below it. Rows are only ever
-- inserted and deleted, never updated, so keeping the floor takes no row
-- lock that a send, a lease or a settle could wait for:
--   - a statement that makes messages ready again (MakeReady,
--     ReleaseMessages) inserts the least of their numbers, lowering the
--     floor in the same transaction (a queue that requires sessions,
--     whose messages are leased through its sessions, keeps none);
--   - RaiseReadyFloor, which the engine runs now and then in a statement
--     of its own, inserts the first ready number it sees (or the queue's
--     next number if none is ready) and deletes the rows its snapshot
--     sees. A message made ready after that snapshot keeps its own row.
--     The engine raises a queue's floor after every 64 statements that
--     lowered it too, so that its rows stay few.
-- New messages are numbered past the queue's last_seq, never below a
-- floor. DeleteQueue deletes a queue's rows in a statement after the one
-- that deletes its messages, and CreateQueue deletes any left: no floor
-- of a deleted queue strands a queue created under its name. No primary
-- key: two statements may insert the same number.
CREATE TABLE sluice_ready_floors (
    service  TEXT   NOT NULL,
    provider TEXT   NOT NULL,
    queue    TEXT   NOT NULL,
    seq      BIGINT NOT NULL
);
CREATE INDEX sluice_ready_floors_queue ON sluice_ready_floors (service, provider, queue, seq);
