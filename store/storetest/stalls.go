package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Tests of writes that wait for a caller's transaction. A group commit
// that waits for a row a caller's open transaction holds stalls; its
// pipeline moves on, so that writes submitted after it are not held back.
// Requests that joined the stalled group wait with it, so each test waits
// for the stall (the backend's log says so) before it submits the writes
// that must pass.

// StallMessage starts the debug message a backend logs when a group
// commit waits and its pipeline moves on.
const StallMessage = "sluice: a group commit waits"

// RunStalls runs the tests of writes that wait for a caller's transaction
// on backends opened by open with the given commit pipelines (1 and 2:
// where every write, or every send, shares the pipeline of the write that
// waits) and logging to log. It is for backends whose writers run side
// by side; on SQLite a caller's transaction holds every write back.
func RunStalls(t *testing.T, open func(t *testing.T, pipelines int, log *slog.Logger) store.Backend) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint("pipelines=", n), func(t *testing.T) {
			w := &stallWatch{stalled: make(chan struct{}, 64)}
			log := slog.New(w)
			b := open(t, n, log)
			h := &harness{backend: b, features: b.Features(), open: func(t *testing.T) store.Backend { return open(t, n, log) }}
			if h.features.CommitPipelines != n {
				t.Fatalf("backend %q runs %d commit pipelines, want %d", h.features.Name, h.features.CommitPipelines, n)
			}
			t.Run("SendStalls", func(t *testing.T) { testSendStalls(t, h, w) })
			t.Run("RenewalStalls", func(t *testing.T) { testRenewalStalls(t, h, w) })
		})
	}
}

// stallWatch is a slog.Handler that signals every stall the backend logs.
type stallWatch struct {
	stalled chan struct{}
}

func (w *stallWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *stallWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, StallMessage) {
		select {
		case w.stalled <- struct{}{}:
		default:
		}
	}
	return nil
}

func (w *stallWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *stallWatch) WithGroup(string) slog.Handler      { return w }

// drain forgets the stalls signalled so far.
func (w *stallWatch) drain() {
	for {
		select {
		case <-w.stalled:
		default:
			return
		}
	}
}

// await waits for the stall of the write just submitted, until budget.
func (w *stallWatch) await(t *testing.T, budget time.Time, what string) {
	t.Helper()
	select {
	case <-w.stalled:
	case <-time.After(time.Until(budget)):
		t.Fatalf("%s: no group commit stalled in time", what)
	}
}

// While a caller's transaction holds a queue's counter row (an open
// EnqueueTx), a send to that queue waits for it; sends to other queues
// and the queue's leases and settles go on, and so does a second send to
// the held queue's pipeline, which waits behind the first instead of
// stalling the pipeline again. After the commit the queue's numbers are
// gap-free and in commit order.
func testSendStalls(t *testing.T, h *harness, w *stallWatch) {
	ctx, st, _, begin := h.txSetup(t)
	te, ok := st.(store.TxEnqueuer)
	if !ok {
		t.Fatalf("backend %q: its Store is not a store.TxEnqueuer", h.features.Name)
	}
	q := createQueue(t, ctx, st, store.QueueSettings{})
	other := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("a", "b")...)
	tx := begin()
	budget := txBudget()
	if _, err := te.EnqueueTx(ctx, tx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: q, Messages: msgs("held")}}}); err != nil {
		t.Fatalf("EnqueueTx: %v", err)
	}
	w.drain()
	send := func(queue, body string) chan error {
		c := make(chan error, 1)
		go func() {
			_, err := st.Enqueue(ctx, &store.EnqueueParams{Queue: queue, Messages: msgs(body)})
			c <- err
		}()
		return c
	}
	blocked := send(q, "blocked")
	w.await(t, budget, "a send to a queue whose counter row a caller holds")
	blocked2 := send(q, "blocked2")
	passes(t, budget, "a send to another queue", send(other, "x"))
	if sameQueueGoesOn(h) {
		passes(t, budget, "a lease and complete of the held queue", func() chan error {
			c := make(chan error, 1)
			go func() { c <- leaseAndComplete(ctx, st, q, "a", "b") }()
			return c
		}())
	}
	for _, c := range []chan error{blocked, blocked2} {
		select {
		case err := <-c:
			t.Fatalf("a send went through while a caller's transaction held its queue's counter row (%v)", err)
		default:
		}
	}
	commit(t, tx)
	for _, c := range []chan error{blocked, blocked2} {
		if err := within(c); err != nil {
			t.Fatalf("a send that waited: %v", err)
		}
	}
	// Later sends to the queue go through the pipeline again.
	if err := within(send(q, "after")); err != nil {
		t.Fatalf("a send after the commit: %v", err)
	}
	got := slices.DeleteFunc(lease(t, ctx, st, q, 10, long), func(l sluicetype.Leased) bool {
		return string(l.Payload) == "a" || string(l.Payload) == "b" // left where leases wait
	})
	if p := payloads(got); len(p) != 4 || p[0] != "held" || !slices.Contains(p, "blocked") || !slices.Contains(p, "blocked2") || p[3] != "after" {
		t.Fatalf("after the commit the queue holds %v, want held, then blocked and blocked2, then after", p)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq+1 {
			t.Fatalf("sequence numbers %d and %d: want consecutive", got[i-1].Seq, got[i].Seq)
		}
	}
}

// While a caller's transaction holds a message's row (an open SettleTx),
// a renewal of that message waits for it; the queue's other settles and
// leases go on. When the caller commits, the renewal finds the message
// gone.
func testRenewalStalls(t *testing.T, h *harness, w *stallWatch) {
	ctx, st, ts, begin := h.txSetup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("held", "free", "later")...)
	ls := lease(t, ctx, st, q, 2, long)
	other := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, other, msgs("free", "later")...)
	ols := lease(t, ctx, st, other, 1, long)
	tx := begin()
	budget := txBudget()
	if err := ts.SettleTx(ctx, tx, txParams(q, store.Complete, ls[0])); err != nil {
		t.Fatalf("SettleTx: %v", err)
	}
	w.drain()
	settle := func(q string, a store.SettleAction, l sluicetype.Leased) chan error {
		c := make(chan error, 1)
		go func() {
			res, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: a, Extension: long, Receipts: []sluicetype.Receipt{l.Receipt}})
			if err == nil {
				err = res[0].Err
			}
			c <- err
		}()
		return c
	}
	renewed := settle(q, store.Extend, ls[0])
	w.await(t, budget, "a renewal of a message a caller's transaction holds")
	// The queue's other messages, where the backend's locks let them by,
	// and another queue's messages.
	free, freeQueue := ls[1], q
	if !sameQueueGoesOn(h) {
		free, freeQueue = ols[0], other
	}
	passes(t, budget, "a complete of another message", settle(freeQueue, store.Complete, free))
	passes(t, budget, "a lease and complete", func() chan error {
		c := make(chan error, 1)
		go func() { c <- leaseAndComplete(ctx, st, freeQueue, "later") }()
		return c
	}())
	select {
	case err := <-renewed:
		t.Fatalf("a renewal went through while a caller's transaction held the message (%v)", err)
	default:
	}
	commit(t, tx)
	if err := within(renewed); !errors.Is(err, sluicetype.ErrLockLost) {
		t.Fatalf("the renewal of a message the caller completed: %v, want ErrLockLost", err)
	}
	if sameQueueGoesOn(h) {
		wantCounts(t, ctx, st, q, store.QueueStats{})
	}
}

// sameQueueGoesOn reports whether the backend's leases and settles of a
// queue go on beside a write of the same queue that waits for a caller's
// transaction. On MariaDB they wait in the database itself: InnoDB queues
// a statement behind a lock another waits for, and its locking reads lock
// the rows they pass over, not only those they return.
func sameQueueGoesOn(h *harness) bool {
	return h.features.Name == "postgres"
}

// txBudget is when a test's waits beside a caller's open transaction
// must end: within the time the server lets the transaction sit idle
// (after which it ends it, and the waiting writes go on all the same).
func txBudget() time.Time {
	return time.Now().Add(store.IdleTransactionTimeout * 3 / 4)
}

// passes waits, until budget, for a write that must not wait for the
// caller's transaction.
func passes(t *testing.T, budget time.Time, what string, c chan error) {
	t.Helper()
	select {
	case err := <-c:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Until(budget)):
		t.Fatalf("%s waited behind a write that waits for a caller's transaction", what)
	}
}

// within waits for a write that waited for a caller's transaction, which
// has ended, for at most waitFor.
func within(c chan error) error {
	select {
	case err := <-c:
		return err
	case <-time.After(waitFor):
		return fmt.Errorf("still waiting %v after the caller's transaction ended", waitFor)
	}
}
