package sluice

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// StreamTxHandler handles an event in a transaction the processor opened
// for it: the handler writes its effects in tx and returns; the
// processor records the event as handled in the same tx and commits it.
// It must not commit or roll back tx itself. Returning an error (or
// panicking) rolls tx back and fails the delivery, retried as for a
// StreamHandler.
type StreamTxHandler func(ctx context.Context, tx *sql.Tx, ev *StreamEvent) error

// HandleTx registers a consumer whose handler writes its effects in a
// transaction on db, the database sluice's tables are in (on PostgreSQL
// with a search_path that reaches them; on SQLite with BEGIN IMMEDIATE,
// as the modernc driver's _txlock=immediate gives). The record that the
// subscription handled the event commits in that transaction, so
// effects on that database are exactly-once: an event whose transaction
// committed is not handed to the handler again, after a crash, a restart
// or a partition moving to another node; one whose transaction rolled
// back, or never committed, is. The subscription's stored position moves
// on as for Handle (at-least-once deliveries, which the record turns into
// one run of the handler's effects). Effects outside db (a call to
// another service) are not covered: they may run again.
//
// A delivery begins its transaction with the record, so the event is
// held for the transaction's length: a second delivery of the same event
// (a partition that moved to another node) waits for it, then skips the
// handler if it committed. A reposition (RepositionStreamSubscription)
// forgets the records of the partitions it moves: the events it delivers
// again are handed to the handler again. On SQLite the transaction holds
// the write lock: keep handlers short.
func (p *StreamProcessor) HandleTx(consumer string, db *sql.DB, h StreamTxHandler, opts *ConsumerOptions) error {
	rec, ok := p.c.st.(store.TxHandledRecorder)
	switch {
	case !ok:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "this backend cannot join a caller's transaction")
	case db == nil:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "nil database")
	case h == nil:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "nil handler")
	}
	return p.Handle(consumer, txHandler(db, rec, h), opts)
}

// txHandler runs h in a transaction that records the event first and
// commits once h returns nil; an event recorded by a committed
// transaction before is not handed to h.
func txHandler(db *sql.DB, rec store.TxHandledRecorder, h StreamTxHandler) StreamHandler {
	return func(ctx context.Context, ev *StreamEvent) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sluice: begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		first, err := rec.MarkHandledTx(ctx, tx, &store.HandledParams{Subscription: ev.Subscription, Partition: ev.Partition, Position: ev.Position})
		if err != nil {
			return err
		}
		if !first {
			return nil // a committed transaction handled it
		}
		if err := h(ctx, tx, ev); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sluice: commit: %w", err)
		}
		return nil
	}
}
