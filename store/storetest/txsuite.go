package storetest

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// Tx is a caller's transaction as the suite's transactional tests use
// it: a *sql.Tx, or a backend's native transaction with Commit and
// Rollback of its own (see RunTx).
type Tx interface {
	store.Tx
	Commit() error
	Rollback() error
}

// beginFunc opens a caller's transaction on the backend's database.
type beginFunc func(ctx context.Context) (Tx, error)

// RunTx runs the suite's tests of writes in a caller's transaction
// (SettleTx and HandledTx) with the transactions begin opens on the
// database of the backend open returns, instead of the backend's own
// BeginTx: a backend whose store.NativeTx carries them checks it this
// way. open is as for Run.
func RunTx(t *testing.T, open func(t *testing.T) store.Backend, begin func(ctx context.Context) (Tx, error)) {
	b := open(t)
	if b == nil {
		t.Fatal("storetest: open returned a nil Backend")
	}
	h := &harness{backend: b, features: b.Features(), open: open, begin: begin}
	for _, g := range []struct {
		name  string
		tests []suiteTest
	}{{"SettleTx", settleTxTests}, {"HandledTx", handledTxTests}} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		})
	}
}

// beginner returns what opens the suite's caller transactions: RunTx's
// begin, else the backend's BeginTx.
func (h *harness) beginner(t *testing.T) beginFunc {
	t.Helper()
	if h.begin != nil {
		return h.begin
	}
	tb, ok := h.backend.(store.TxBeginner)
	if !ok {
		t.Fatalf("backend %q is not a store.TxBeginner", h.features.Name)
	}
	return func(ctx context.Context) (Tx, error) {
		tx, err := tb.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return tx, nil
	}
}
