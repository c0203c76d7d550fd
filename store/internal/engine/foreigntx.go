package engine

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// foreignTx is a *sql.Tx the caller opened, perhaps on a pool of its own:
// statements run on it as text, since statements prepared on the
// engine's pool cannot move to another pool's transaction.
type foreignTx struct{ *sql.Tx }

// nativeTx is a caller's transaction outside database/sql (a pgx.Tx on
// PostgreSQL): statements run on it as text too.
type nativeTx struct{ tx store.NativeTx }

// ExecContext implements querier.
func (n nativeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return n.tx.ExecContext(ctx, query, args...)
}

// foreign returns the querier of a caller's transaction: a *sql.Tx, or a
// NativeTx of the engine's dialect. Anything else (nil, a *sql.DB, a
// NativeTx of another backend) is ErrInvalidArgument.
func (e *Engine) foreign(tx store.Tx) (querier, error) {
	switch v := tx.(type) {
	case *sql.Tx:
		if v != nil {
			return foreignTx{v}, nil
		}
	case store.NativeTx:
		if d := v.TxDialect(); d != e.d.Features.Name {
			return nil, fmt.Errorf("a %s transaction (%T) on a %s backend: %w", d, tx, e.d.Features.Name, sluicetype.ErrInvalidArgument)
		}
		return nativeTx{v}, nil
	}
	return nil, fmt.Errorf("transaction of type %T: want a *sql.Tx, or a %s transaction the backend's package wraps (store.NativeTx): %w",
		tx, e.d.Features.Name, sluicetype.ErrInvalidArgument)
}

// isForeign reports whether q is a caller's transaction.
func isForeign(q querier) bool {
	switch q.(type) {
	case foreignTx, nativeTx:
		return true
	}
	return false
}
