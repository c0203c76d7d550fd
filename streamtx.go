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
// the write lock: keep handlers short. HandleTxWith does the same with
// transactions of another type (a pgx.Tx on PostgreSQL).
func (p *StreamProcessor) HandleTx(consumer string, db *sql.DB, h StreamTxHandler, opts *ConsumerOptions) error {
	if db == nil {
		return errInvalid(fmt.Sprintf("handle %q", consumer), "nil database")
	}
	return HandleTxWith(p, consumer, sqlTxSource{db}, h, opts)
}

// TxSource opens and ends the application's transactions of type T for
// HandleTxWith: a *sql.Tx on a *sql.DB (what HandleTx uses), or on
// PostgreSQL a pgx.Tx on a *pgxpool.Pool (postgres.Transactions).
type TxSource[T any] interface {
	// Begin opens a transaction on the database sluice's tables are in.
	Begin(ctx context.Context) (T, error)
	// Commit commits tx.
	Commit(ctx context.Context, tx T) error
	// Rollback rolls tx back. HandleTxWith also calls it after a commit,
	// ignoring its error, as it does every error of a rollback.
	Rollback(ctx context.Context, tx T) error
	// Tx is tx as sluice writes in it (a *sql.Tx is itself; a pgx.Tx is
	// wrapped by postgres.WrapTx).
	Tx(tx T) Tx
}

// HandleTxWith registers a consumer as HandleTx does, with the handler's
// transactions of type T opened and ended by src: on PostgreSQL with
// pgx, postgres.Transactions{Pool: pool} hands the handler a pgx.Tx. The
// record that the subscription handled the event is written in the
// handler's transaction before the handler runs, and commits with it;
// what HandleTx says of exactly-once effects holds the same.
func HandleTxWith[T any](p *StreamProcessor, consumer string, src TxSource[T], h func(ctx context.Context, tx T, ev *StreamEvent) error, opts *ConsumerOptions) error {
	rec, ok := p.c.st.(store.TxHandledRecorder)
	switch {
	case !ok:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "this backend cannot join a caller's transaction")
	case src == nil:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "nil transaction source")
	case h == nil:
		return errInvalid(fmt.Sprintf("handle %q", consumer), "nil handler")
	}
	return p.Handle(consumer, txHandler(src, rec, h), opts)
}

// sqlTxSource opens transactions on a *sql.DB.
type sqlTxSource struct{ db *sql.DB }

func (s sqlTxSource) Begin(ctx context.Context) (*sql.Tx, error) { return s.db.BeginTx(ctx, nil) }

func (sqlTxSource) Commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

func (sqlTxSource) Rollback(_ context.Context, tx *sql.Tx) error { return tx.Rollback() }

func (sqlTxSource) Tx(tx *sql.Tx) Tx { return tx }

// txHandler runs h in a transaction that records the event first and
// commits once h returns nil; an event recorded by a committed
// transaction before is not handed to h.
func txHandler[T any](src TxSource[T], rec store.TxHandledRecorder, h func(context.Context, T, *StreamEvent) error) StreamHandler {
	return func(ctx context.Context, ev *StreamEvent) error {
		tx, err := src.Begin(ctx)
		if err != nil {
			return fmt.Errorf("sluice: begin: %w", err)
		}
		defer func() { _ = src.Rollback(context.WithoutCancel(ctx), tx) }()
		first, err := rec.MarkHandledTx(ctx, src.Tx(tx), &store.HandledParams{Subscription: ev.Subscription, Partition: ev.Partition, Position: ev.Position})
		if err != nil {
			return err
		}
		if !first {
			return nil // a committed transaction handled it
		}
		if err := h(ctx, tx, ev); err != nil {
			return err
		}
		if err := src.Commit(ctx, tx); err != nil {
			return fmt.Errorf("sluice: commit: %w", err)
		}
		return nil
	}
}
