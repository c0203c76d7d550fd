package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// testEnqueueAllArrivals: an EnqueueAll's duplicate checks at entities it
// passes through (a topic, a forwarding queue) drop the copies that came
// through a duplicate, across sends and within one, on every node; and
// the copies of a fan-out are not bound by the batch limits.
func testEnqueueAllArrivals(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	via := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: time.Minute})
	next := createQueue(t, ctx, st, store.QueueSettings{DuplicateDetectionWindow: time.Minute})
	a := createQueue(t, ctx, st, store.QueueSettings{})
	b := createQueue(t, ctx, st, store.QueueSettings{})
	// send routes message id through via to a and b, and to b also
	// through next (a second check, after via's).
	send := func(id, body string) (store.EnqueueAllResult, error) {
		m := msg(body)
		m.MessageID = id
		return st.EnqueueAll(ctx, &store.EnqueueAllParams{
			Batches: []store.EnqueueParams{{Queue: a, Messages: []store.NewMessage{m}}, {Queue: b, Messages: []store.NewMessage{m, m}}},
			Arrivals: []store.Arrival{
				{Queue: via, MessageID: id, After: -1},
				{Queue: next, MessageID: id, After: 0},
				{Queue: next, MessageID: id, After: 0},
			},
			Through: [][]int{{0}, {1, 2}},
		})
	}
	got, err := send("X", "first")
	if err != nil {
		t.Fatalf("EnqueueAll with arrivals: %v", err)
	}
	// The second arrival at next, in the same send, is a duplicate.
	if len(got.Seqs) != 2 || got.Seqs[0][0] != 1 || got.Seqs[1][0] != 1 || got.Seqs[1][1] != 0 {
		t.Fatalf("EnqueueAll with arrivals = %v, want [[1] [1 0]]", got.Seqs)
	}
	if _, err := send("X", "again"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = send("Y", fmt.Sprint("racing ", i))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("racing EnqueueAll: %v", err)
		}
	}
	wantSeqs(t, "queue a", messageSeqs(peekAll(t, ctx, st, a)), []int64{1, 2})
	wantSeqs(t, "queue b", messageSeqs(peekAll(t, ctx, st, b)), []int64{1, 2})
	if ms := peekAll(t, ctx, st, via); len(ms) != 0 {
		t.Fatalf("the checking entity holds %d messages", len(ms))
	}

	// A checking entity that is gone fails the send, whole.
	_, err = st.EnqueueAll(ctx, &store.EnqueueAllParams{
		Batches:  []store.EnqueueParams{{Queue: a, Messages: msgs("z")}},
		Arrivals: []store.Arrival{{Queue: "missing-" + randHex(3), MessageID: "Z", After: -1}},
		Through:  [][]int{{0}},
	})
	wantErr(t, "EnqueueAll through a missing entity", err, sluicetype.ErrQueueNotFound)
	_, err = st.EnqueueAll(ctx, &store.EnqueueAllParams{
		Batches:  []store.EnqueueParams{{Queue: a, Messages: msgs("z")}},
		Arrivals: []store.Arrival{{Queue: via, MessageID: "Z", After: 0}},
		Through:  [][]int{{0}},
	})
	wantErr(t, "an arrival after itself", err, sluicetype.ErrInvalidArgument)

	// A fan-out larger than a batch: limits bound what was sent, not the
	// copies.
	wide := make([]store.NewMessage, store.DefaultMaxBatch+1)
	for i := range wide {
		wide[i] = msg("w")
	}
	if _, err := st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{{Queue: a, Messages: wide}}}); err != nil {
		t.Fatalf("EnqueueAll of %d copies: %v", len(wide), err)
	}
}
