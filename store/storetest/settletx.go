package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var settleTxTests = []suiteTest{
	{"CommitApplies", testSettleTxCommit},
	{"AbandonOnLastDelivery", testSettleTxAbandonExhausted},
	{"RollbackKeepsLock", testSettleTxRollback},
	{"LockLostLeavesTxUsable", testSettleTxLockLost},
	{"Session", testSettleTxSession},
	{"SessionLockLost", testSettleTxSessionLost},
	{"Invalid", testSettleTxInvalid},
	{"OtherMessagesNotStalled", testSettleTxNoStall},
	{"RaceWithLeases", testSettleTxRace},
}

// txSetup returns the test's store as a TxSettler, and a function that
// opens a transaction on the backend's database (rolled back at the
// test's end unless it ended before).
func (h *harness) txSetup(t *testing.T) (context.Context, store.Store, store.TxSettler, func() Tx) {
	t.Helper()
	ctx, st := h.setup(t)
	ts, ok := st.(store.TxSettler)
	if !ok {
		t.Fatalf("backend %q: its Store is not a store.TxSettler", h.features.Name)
	}
	open := h.beginner(t)
	begin := func() Tx {
		t.Helper()
		tx, err := open(ctx)
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx
	}
	return ctx, st, ts, begin
}

func txParams(q string, a store.SettleAction, ls ...sluicetype.Leased) *store.SettleTxParams {
	p := &store.SettleTxParams{SettleParams: store.SettleParams{Queue: q, Action: a}}
	for _, l := range ls {
		p.Receipts = append(p.Receipts, l.Receipt)
	}
	return p
}

func commit(t *testing.T, tx Tx) {
	t.Helper()
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// Each action, committed, applies as Settle would.
func testSettleTxCommit(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	seqs := enqueue(t, ctx, st, q, msgs("complete", "abandon", "dead", "defer")...)
	ls := lease(t, ctx, st, q, 4, long)
	tx := begin()
	settleTx := func(p *store.SettleTxParams) {
		t.Helper()
		if err := ts.SettleTx(ctx, tx, p); err != nil {
			t.Fatalf("SettleTx %s: %v", p.Action, err)
		}
	}
	settleTx(txParams(q, store.Complete, ls[0]))
	settleTx(txParams(q, store.Abandon, ls[1]))
	dl := txParams(q, store.DeadLetter, ls[2])
	dl.Reason, dl.Description, dl.Properties = "bad", "in a tx", map[string]string{"k": "v"}
	settleTx(dl)
	settleTx(txParams(q, store.Defer, ls[3]))
	// Uncommitted: another connection still sees every message leased.
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 4})
	commit(t, tx)

	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Deferred: 1, DeadLettered: 1})
	again := lease(t, ctx, st, q, 4, long)
	if len(again) != 1 || again[0].Seq != seqs[1] || again[0].DeliveryCount != 2 {
		t.Fatalf("lease after an abandon in a tx: %+v, want message %d with DeliveryCount 2", again, seqs[1])
	}
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || d[0].Seq != seqs[2] || d[0].Reason != "bad" || d[0].Description != "in a tx" || d[0].Properties["k"] != "v" {
		t.Fatalf("dead letters after a dead-letter in a tx: %+v", d)
	}
	def, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: []int64{seqs[3]}, Visibility: long})
	if err != nil || len(def) != 1 {
		t.Fatalf("LeaseDeferred after a defer in a tx: %v, %v", def, err)
	}
}

// An abandon on the last allowed delivery dead-letters the message, in
// the caller's transaction, as Settle does.
func testSettleTxAbandonExhausted(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 1})
	enqueue(t, ctx, st, q, msg("last"))
	ls := lease(t, ctx, st, q, 1, long)
	tx := begin()
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Abandon, ls...)); err != nil {
		t.Fatalf("SettleTx abandon: %v", err)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("dead letters visible before the commit: %v", deadSeqs(d))
	}
	commit(t, tx)
	d := deadAll(t, ctx, st, q)
	if len(d) != 1 || d[0].Seq != ls[0].Seq || d[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded {
		t.Fatalf("dead letters after abandoning the last delivery in a tx: %+v", d)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{DeadLettered: 1})
}

// A rolled-back settle changes nothing: the lock still holds (its
// receipt settles), and once it ends the message is delivered again with
// its delivery counted.
func testSettleTxRollback(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("kept", "expires")...)
	ls := lease(t, ctx, st, q, 1, long)
	short := lease(t, ctx, st, q, 1, time.Second)
	tx := begin()
	for _, l := range append(ls, short...) {
		if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, l)); err != nil {
			t.Fatalf("SettleTx: %v", err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 2})
	if got := lease(t, ctx, st, q, 2, long); len(got) != 0 {
		t.Fatalf("lease after a rolled-back complete took %v while the locks hold", leasedSeqs(got))
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls...)
	var again []sluicetype.Leased
	eventually(t, "message delivered again after its lock ended", func() bool {
		again = lease(t, ctx, st, q, 1, long)
		return len(again) > 0
	})
	if again[0].Seq != short[0].Seq || again[0].DeliveryCount != 2 {
		t.Fatalf("delivered again: message %d with DeliveryCount %d, want %d with 2", again[0].Seq, again[0].DeliveryCount, short[0].Seq)
	}
}

// A receipt that does not hold fails the settle with ErrLockLost and
// writes nothing: the transaction goes on and commits its other work.
func testSettleTxLockLost(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("a", "b", "expired")...)
	ls := lease(t, ctx, st, q, 2, long)
	expired := lease(t, ctx, st, q, 1, 200*time.Millisecond)
	sleepUntil(t, time.Now().Add(400*time.Millisecond))
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[1])

	tx := begin()
	wrong := ls[0]
	wrong.Receipt.Token++
	for what, p := range map[string]*store.SettleTxParams{
		"a wrong token":                 txParams(q, store.Complete, wrong),
		"a completed message":           txParams(q, store.Abandon, ls[1]),
		"an ended lock":                 txParams(q, store.DeadLetter, expired[0]),
		"a held and a lost one at once": txParams(q, store.Complete, ls[0], ls[1]),
	} {
		wantErr(t, "SettleTx of "+what, ts.SettleTx(ctx, tx, p), sluicetype.ErrLockLost)
	}
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, ls[0])); err != nil {
		t.Fatalf("SettleTx in the same tx after lost locks: %v", err)
	}
	commit(t, tx)
	again := lease(t, ctx, st, q, 10, long)
	if len(again) != 1 || again[0].Seq != expired[0].Seq || again[0].DeliveryCount != 2 {
		t.Fatalf("after the commit: leased %+v, want only the expired message, delivered twice", again)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 0 {
		t.Fatalf("a refused dead-letter wrote dead letters: %v", deadSeqs(d))
	}
}

// A session's message and state settle together, under the session's
// lock, or (rolled back) not at all.
func testSettleTxSession(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true})
	enqueue(t, ctx, st, q, inSession("s", "1"), inSession("s", "2"))
	l := accept(t, st, q, "s", long)
	sp := sessionParams(q, l)
	ls := leaseIn(t, st, q, l, 2)
	settleIn := func(tx Tx, a store.SettleAction, m sluicetype.Leased, state string) {
		t.Helper()
		p := txParams(q, a, m)
		p.Session = &sp
		if err := ts.SettleTx(ctx, tx, p); err != nil {
			t.Fatalf("SettleTx %s in session: %v", a, err)
		}
		if err := ts.SetSessionStateTx(ctx, tx, &store.SessionStateParams{SessionParams: sp, State: []byte(state)}); err != nil {
			t.Fatalf("SetSessionStateTx: %v", err)
		}
	}
	tx := begin()
	settleIn(tx, store.Complete, ls[0], "rolled back")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got, err := st.SessionState(ctx, &sp); err != nil || got != nil {
		t.Fatalf("state after a rollback = %q, %v; want none", got, err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 2})

	tx = begin()
	settleIn(tx, store.Complete, ls[0], "after 1")
	settleIn(tx, store.Defer, ls[1], "after 2")
	commit(t, tx)
	if got, err := st.SessionState(ctx, &sp); err != nil || !reflect.DeepEqual(got, []byte("after 2")) {
		t.Fatalf("state after the commit = %q, %v; want \"after 2\"", got, err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Deferred: 1})
	tx = begin()
	if err := ts.SetSessionStateTx(ctx, tx, &store.SessionStateParams{SessionParams: sp}); err != nil {
		t.Fatalf("SetSessionStateTx(nil): %v", err)
	}
	commit(t, tx)
	if got, err := st.SessionState(ctx, &sp); err != nil || got != nil {
		t.Fatalf("state after clearing in a tx = %q, %v", got, err)
	}
}

// Without the session's lock nothing is written and the transaction
// goes on.
func testSettleTxSessionLost(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true})
	enqueue(t, ctx, st, q, inSession("s", "1"))
	l := accept(t, st, q, "s", long)
	sp := sessionParams(q, l)
	ls := leaseIn(t, st, q, l, 1)
	tx := begin()
	wrong := sp
	wrong.Token++
	p := txParams(q, store.Complete, ls...)
	p.Session = &wrong
	wantErr(t, "SettleTx under another session lock", ts.SettleTx(ctx, tx, p), sluicetype.ErrSessionLockLost)
	wantErr(t, "SetSessionStateTx under another session lock",
		ts.SetSessionStateTx(ctx, tx, &store.SessionStateParams{SessionParams: wrong, State: []byte("x")}), sluicetype.ErrSessionLockLost)
	p.Session = nil
	wantErr(t, "SettleTx of a session message without its session", ts.SettleTx(ctx, tx, p), sluicetype.ErrSessionRequired)
	p.Session = &sp
	if err := ts.SettleTx(ctx, tx, p); err != nil {
		t.Fatalf("SettleTx after refused ones: %v", err)
	}
	commit(t, tx)
	wantEmpty(t, ctx, st, q)

	// A released session's lock holds nothing.
	enqueue(t, ctx, st, q, inSession("t", "2"))
	l = accept(t, st, q, "t", long)
	sp = sessionParams(q, l)
	ls = leaseIn(t, st, q, l, 1)
	if err := st.ReleaseSession(ctx, &sp); err != nil {
		t.Fatal(err)
	}
	tx = begin()
	p = txParams(q, store.Complete, ls...)
	p.Session = &sp
	wantErr(t, "SettleTx after the session's release", ts.SettleTx(ctx, tx, p), sluicetype.ErrSessionLockLost)
	commit(t, tx)
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1})
}

// Bad input is refused before the transaction is touched.
func testSettleTxInvalid(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("m"))
	ls := lease(t, ctx, st, q, 1, long)
	tx := begin()
	ext := txParams(q, store.Extend, ls...)
	ext.Extension = time.Minute
	sp := store.SessionParams{Queue: q, SessionID: "s"}
	withSession := txParams(q, store.Complete, ls...)
	withSession.Session = &sp
	for what, c := range map[string]struct {
		tx  Tx
		p   *store.SettleTxParams
		err error
	}{
		"a nil transaction":          {nil, txParams(q, store.Complete, ls...), sluicetype.ErrInvalidArgument},
		"an extend":                  {tx, ext, sluicetype.ErrInvalidArgument},
		"a release":                  {tx, txParams(q, store.Release, ls...), sluicetype.ErrInvalidArgument},
		"no receipt":                 {tx, txParams(q, store.Complete), sluicetype.ErrInvalidArgument},
		"a receipt twice":            {tx, txParams(q, store.Complete, ls[0], ls[0]), sluicetype.ErrInvalidArgument},
		"a session on a plain queue": {tx, withSession, sluicetype.ErrInvalidArgument},
		"a missing queue":            {tx, txParams("no-such-queue", store.Complete, ls...), sluicetype.ErrQueueNotFound},
	} {
		wantErr(t, "SettleTx with "+what, ts.SettleTx(ctx, c.tx, c.p), c.err)
	}
	wantErr(t, "SetSessionStateTx with a nil transaction",
		ts.SetSessionStateTx(ctx, nil, &store.SessionStateParams{SessionParams: sp}), sluicetype.ErrInvalidArgument)
	wantErr(t, "SetSessionStateTx on a plain queue",
		ts.SetSessionStateTx(ctx, tx, &store.SessionStateParams{SessionParams: sp}), sluicetype.ErrInvalidArgument)
	// The transaction is still usable.
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, ls...)); err != nil {
		t.Fatalf("SettleTx after refused ones: %v", err)
	}
	commit(t, tx)
	wantEmpty(t, ctx, st, q)
}

// While a caller's transaction holds a settled message, the engine goes
// on for other queues on a database server: sends and leases do not wait
// for it; on PostgreSQL neither do leases of the same queue's other
// messages. (On MariaDB a lease of the same queue may pass over its other
// messages until InnoDB purges the index entry the held message's own
// lease left behind: the transaction should be short.) On SQLite every
// write waits for the transaction's write lock, and goes on once it ends.
func testSettleTxNoStall(t *testing.T, h *harness) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	other := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("held", "free")...)
	ls := lease(t, ctx, st, q, 1, long)
	tx := begin()
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, ls...)); err != nil {
		t.Fatalf("SettleTx: %v", err)
	}
	sameQueue := h.features.Name == "postgres"
	done := make(chan error, 1)
	go func() { done <- sendAndLease(ctx, st, other, q, sameQueue) }()
	if h.features.Name == "sqlite" {
		select {
		case err := <-done:
			t.Fatalf("a write went through while a caller's transaction held SQLite's write lock (%v)", err)
		case <-time.After(100 * time.Millisecond):
		}
		commit(t, tx)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitFor):
		t.Fatalf("a send and a lease waited %v for a caller's open transaction", waitFor)
	}
	commit(t, tx)
	if !sameQueue {
		got := lease(t, ctx, st, q, 2, long)
		if len(got) != 1 || string(got[0].Payload) != "free" {
			t.Fatalf("lease after the commit: %v, want only \"free\"", payloads(got))
		}
	}
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 1})
}

// sendAndLease sends a message to queue other and leases it, and with
// sameQueue leases the one message of q that is free.
func sendAndLease(ctx context.Context, st store.Store, other, q string, sameQueue bool) error {
	if _, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: other, Messages: msgs("x")}); err != nil {
		return err
	}
	check := func(queue, want string) error {
		got, err := st.Lease(ctx, &store.LeaseParams{Queue: queue, Max: 2, Visibility: long})
		if err != nil {
			return err
		}
		if len(got) != 1 || string(got[0].Payload) != want {
			return fmt.Errorf("lease of %s while a caller's transaction is open: %v, want only %q", queue, payloads(got), want)
		}
		return nil
	}
	if err := check(other, "x"); err != nil || !sameQueue {
		return err
	}
	return check(q, "free")
}

// Receivers that lease and settle in their own transactions, racing with
// each other's leases, complete every message once, without a deadlock
// or an error.
func testSettleTxRace(t *testing.T, h *harness) {
	ctx, st, ts, _ := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	const n, workers = 60, 4
	payloads := make([]string, n)
	for i := range payloads {
		payloads[i] = randHex(4)
	}
	enqueue(t, ctx, st, q, msgs(payloads...)...)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		completed = make(map[int64]int)
		wg        sync.WaitGroup
		errs      = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- raceWorker(ctx, st, ts, h.beginner(t), q, func(seq int64) {
				mu.Lock()
				completed[seq]++
				mu.Unlock()
			})
		}()
	}
	eventually(t, "every message completed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(completed) == n
	})
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("worker: %v", err)
		}
	}
	for seq, c := range completed {
		if c != 1 {
			t.Fatalf("message %d completed %d times", seq, c)
		}
	}
	wantEmpty(t, context.Background(), st, q)
}

// raceWorker leases a few messages at a time and completes each in a
// transaction of its own until ctx ends.
func raceWorker(ctx context.Context, st store.Store, ts store.TxSettler, begin beginFunc, q string, done func(int64)) error {
	for ctx.Err() == nil {
		ls, err := st.Lease(ctx, &store.LeaseParams{Queue: q, Max: 3, Visibility: long})
		if err != nil {
			return err
		}
		for _, l := range ls {
			if err := completeInTx(ctx, ts, begin, q, l); err != nil {
				return err
			}
			done(l.Seq)
		}
	}
	return ctx.Err()
}

// completeInTx completes one message in a transaction of its own.
func completeInTx(ctx context.Context, ts store.TxSettler, begin beginFunc, q string, l sluicetype.Leased) error {
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, l)); err != nil {
		return err
	}
	return tx.Commit()
}
