package store

import (
	"context"
	"database/sql"
)

// Tx is a transaction the caller opened on the backend's database, in
// which the *Tx operations (EnqueueTx, AppendTx, SettleTx,
// SetSessionStateTx, MarkHandledTx) write. A *sql.Tx is one. A
// transaction of another database library is one when it is a NativeTx
// of the backend's dialect (store/postgres's WrapTx makes one of a
// pgx.Tx). Anything else, a *sql.DB or a *sql.Conn included, is refused
// with ErrInvalidArgument: its writes would not be atomic with the
// caller's.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// NativeTx is a transaction outside database/sql that a backend runs its
// statements on, as text with the dialect's placeholders. Values scanned
// from its rows must convert as database/sql converts them into the
// destinations the engine uses (integers of any width, strings, []byte,
// bools and the sql.Null* types).
type NativeTx interface {
	Tx
	// TxDialect is the name of the backend the transaction belongs to
	// (Features.Name: "postgres"); another backend refuses it.
	TxDialect() string
	// QueryRows runs a query and returns its rows.
	QueryRows(ctx context.Context, query string, args ...any) (Rows, error)
	// QueryOne runs a query expected to return at most one row; its Scan
	// returns sql.ErrNoRows when there is none.
	QueryOne(ctx context.Context, query string, args ...any) Row
}

// Rows are the rows of a NativeTx's query, read as *sql.Rows are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Row is the one row of a NativeTx's query, read as a *sql.Row is.
type Row interface {
	Scan(dest ...any) error
}
