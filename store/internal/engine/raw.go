package engine

import (
	"context"
	"database/sql"
)

// RawSetup creates the raw-insert benchmark's table: a plain table with
// no sluice code in its path, on the same pool and durability settings as
// everything else, so that `sluice bench --scenario raw-insert` measures
// the database's own limit.
func (e *Engine) RawSetup(ctx context.Context) error {
	if _, err := e.w.ExecContext(ctx, e.q[qBenchDropTable]); err != nil {
		return err
	}
	_, err := e.w.ExecContext(ctx, e.q[qBenchCreateTable])
	return err
}

// RawInsert inserts one row per payload with plain INSERT statements in
// one transaction.
func (e *Engine) RawInsert(ctx context.Context, payloads [][]byte) error {
	return e.inTx(ctx, func(tx *sql.Tx) error {
		for _, p := range payloads {
			if _, err := e.exec(ctx, tx, qBenchInsert, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// RawTeardown drops the raw-insert benchmark's table.
func (e *Engine) RawTeardown(ctx context.Context) error {
	_, err := e.w.ExecContext(ctx, e.q[qBenchDropTable])
	return err
}
