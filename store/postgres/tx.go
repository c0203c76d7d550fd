package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Tx is a pgx.Tx that sluice writes in: the application's own
// transaction, on the database sluice's tables are in, handed to the
// *Tx calls (sluice.Receiver.CompleteTx, Sender.SendTx,
// Client.PublishTx...) as a *sql.Tx would be. Make one with WrapTx.
// sluice's statements run on it as text (pgx caches their plans), and
// the notifications that wake receivers are sent with its commit.
type Tx struct{ tx pgx.Tx }

var _ store.NativeTx = Tx{}

// WrapTx returns tx as sluice writes in it. It does not begin, commit or
// roll back tx: that stays the application's.
func WrapTx(tx pgx.Tx) Tx { return Tx{tx} }

// Unwrap returns the pgx.Tx that WrapTx wrapped.
func (t Tx) Unwrap() pgx.Tx { return t.tx }

// TxDialect implements store.NativeTx: the transaction is PostgreSQL's.
func (Tx) TxDialect() string { return dialectName }

// ExecContext implements store.Tx.
func (t Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return result(tag), nil
}

// QueryRows implements store.NativeTx.
func (t Tx) QueryRows(ctx context.Context, query string, args ...any) (store.Rows, error) {
	rows, err := t.tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return txRows{rows}, nil
}

// QueryOne implements store.NativeTx.
func (t Tx) QueryOne(ctx context.Context, query string, args ...any) store.Row {
	return t.tx.QueryRow(ctx, query, args...)
}

// result is an Exec's sql.Result: the rows its command tag counts.
type result pgconn.CommandTag

// LastInsertId is not supported: PostgreSQL's queries return new numbers
// with RETURNING.
func (result) LastInsertId() (int64, error) {
	return 0, errors.New("sluice: postgres: LastInsertId is not supported")
}

// RowsAffected is the count of the command tag.
func (r result) RowsAffected() (int64, error) { return pgconn.CommandTag(r).RowsAffected(), nil }

// txRows are pgx.Rows read as *sql.Rows are.
type txRows struct{ pgx.Rows }

// Close closes the rows and returns their error.
func (r txRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

// Transactions opens pgx transactions on an application's pool for
// sluice.HandleTxWith, whose handler then receives a pgx.Tx:
//
//	sluice.HandleTxWith(proc, "billing", postgres.Transactions{Pool: pool},
//		func(ctx context.Context, tx pgx.Tx, ev *sluice.StreamEvent) error { ... }, nil)
type Transactions struct {
	Pool *pgxpool.Pool
	// Options are the transactions' (the zero value: the pool's
	// defaults, READ COMMITTED unless the server is set otherwise).
	Options pgx.TxOptions
}

// Begin opens a transaction on the pool (ErrInvalidArgument without one).
func (s Transactions) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.Pool == nil {
		return nil, fmt.Errorf("sluice: postgres: Transactions without a Pool: %w", sluicetype.ErrInvalidArgument)
	}
	return s.Pool.BeginTx(ctx, s.Options)
}

// Commit commits tx.
func (Transactions) Commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

// Rollback rolls tx back (after a commit it fails with pgx.ErrTxClosed,
// which HandleTxWith ignores).
func (Transactions) Rollback(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) }

// Tx returns tx as sluice writes in it (WrapTx).
func (Transactions) Tx(tx pgx.Tx) store.Tx { return WrapTx(tx) }
