package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var handledTxTests = []suiteTest{
	{"OnceCommitted", testHandledOnce},
	{"ConcurrentWaits", testHandledConcurrent},
	{"Invalid", testHandledInvalid},
}

func handledSetup(t *testing.T, h *harness) (context.Context, store.TxHandledRecorder, beginFunc) {
	t.Helper()
	ctx, st := h.setup(t)
	rec, ok := st.(store.TxHandledRecorder)
	if !ok {
		t.Fatalf("backend %q: its Store is not a store.TxHandledRecorder", h.features.Name)
	}
	return ctx, rec, h.beginner(t)
}

// markIn records p in a transaction of its own, committed or rolled
// back, and returns what MarkHandledTx reported.
func markIn(ctx context.Context, rec store.TxHandledRecorder, begin beginFunc, p *store.HandledParams, commit bool) (bool, error) {
	tx, err := begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	first, err := rec.MarkHandledTx(ctx, tx, p)
	if err != nil || !commit {
		return first, err
	}
	return first, tx.Commit()
}

// An event's record counts once committed: a rolled-back one does not.
func testHandledOnce(t *testing.T, h *harness) {
	ctx, rec, begin := handledSetup(t, h)
	p := &store.HandledParams{Subscription: "sub-" + randHex(4), Partition: 3, Position: 42}
	for i, c := range []struct{ commit, first bool }{{false, true}, {true, true}, {true, false}, {false, false}} {
		first, err := markIn(ctx, rec, begin, p, c.commit)
		if err != nil || first != c.first {
			t.Fatalf("step %d: MarkHandledTx = %v, %v; want %v", i, first, err, c.first)
		}
	}
	other := *p
	other.Position++
	if first, err := markIn(ctx, rec, begin, &other, true); err != nil || !first {
		t.Fatalf("the next position: MarkHandledTx = %v, %v; want true", first, err)
	}
	other = *p
	other.Subscription += "-2"
	if first, err := markIn(ctx, rec, begin, &other, true); err != nil || !first {
		t.Fatalf("another subscription: MarkHandledTx = %v, %v; want true", first, err)
	}
}

// A second transaction recording the same event waits for the first and
// learns its outcome: so two deliveries racing after a lease changed
// hands run the handler's effects once.
func testHandledConcurrent(t *testing.T, h *harness) {
	ctx, rec, begin := handledSetup(t, h)
	p := &store.HandledParams{Subscription: "sub-" + randHex(4), Partition: 0, Position: 7}
	for _, commitFirst := range []bool{false, true} {
		p.Position++
		tx, err := begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if first, err := rec.MarkHandledTx(ctx, tx, p); err != nil || !first {
			t.Fatalf("MarkHandledTx = %v, %v", first, err)
		}
		type result struct {
			first bool
			err   error
		}
		done := make(chan result, 1)
		go func() {
			first, err := markIn(ctx, rec, begin, p, true)
			done <- result{first, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("a second record of an event went through (%v, %v) while the first transaction was open", r.first, r.err)
		case <-time.After(100 * time.Millisecond):
		}
		end := tx.Rollback
		if commitFirst {
			end = tx.Commit
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.first == commitFirst {
			t.Fatalf("first transaction committed %v: the second's MarkHandledTx = %v, %v; want %v", commitFirst, r.first, r.err, !commitFirst)
		}
	}
}

func testHandledInvalid(t *testing.T, h *harness) {
	ctx, rec, begin := handledSetup(t, h)
	tx, err := begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for what, c := range map[string]struct {
		tx  Tx
		p   store.HandledParams
		err error
	}{
		"a nil transaction":    {nil, store.HandledParams{Subscription: "s", Position: 1}, sluicetype.ErrInvalidArgument},
		"position 0":           {tx, store.HandledParams{Subscription: "s", Position: 0}, sluicetype.ErrInvalidArgument},
		"a negative partition": {tx, store.HandledParams{Subscription: "s", Partition: -1, Position: 1}, sluicetype.ErrInvalidArgument},
		"no subscription":      {tx, store.HandledParams{Position: 1}, sluicetype.ErrInvalidName},
	} {
		_, err := rec.MarkHandledTx(ctx, c.tx, &c.p)
		wantErr(t, "MarkHandledTx with "+what, err, c.err)
	}
	if first, err := rec.MarkHandledTx(ctx, tx, &store.HandledParams{Subscription: "s", Position: 1}); err != nil || !first {
		t.Fatalf("MarkHandledTx after refused ones: %v, %v", first, err)
	}
}
