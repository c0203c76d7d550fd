package storetest

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

var bodyTests = []suiteTest{
	{"SharedAcrossCopies", testSharedBodies},
	{"SweptWhenUnused", testSharedBodiesSwept},
}

// sharedSend enqueues, with EnqueueAll, one copy of a large payload into
// each queue (the copies share the payload's memory, as a topic's do),
// and a small message into the first.
func sharedSend(t *testing.T, st store.Store, payload []byte, queues ...string) {
	t.Helper()
	p := &store.EnqueueAllParams{}
	for i, q := range queues {
		b := store.EnqueueParams{Queue: q, Messages: []store.NewMessage{{Payload: payload}}}
		if i == 0 {
			b.Messages = append(b.Messages, msg("small"))
		}
		p.Batches = append(p.Batches, b)
	}
	if _, err := st.EnqueueAll(t.Context(), p); err != nil {
		t.Fatalf("EnqueueAll of a %d-byte payload to %d queues: %v", len(payload), len(queues), err)
	}
}

func bigPayload(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// The copies of a large message read back whole on every path: lease,
// peek, a lease by number of a deferred copy, a session's lease, dead
// letters peeked, leased and resubmitted.
func testSharedBodies(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	payload := bigPayload(256 << 10)
	var qs []string
	for range 4 {
		qs = append(qs, createQueue(t, ctx, st, store.QueueSettings{}))
	}
	sessions := createQueue(t, ctx, st, store.QueueSettings{RequiresSession: true})
	p := &store.EnqueueAllParams{}
	for _, q := range qs {
		p.Batches = append(p.Batches, store.EnqueueParams{Queue: q, Messages: []store.NewMessage{{Payload: payload}}})
	}
	p.Batches = append(p.Batches, store.EnqueueParams{Queue: sessions, Messages: []store.NewMessage{{Payload: payload, SessionID: "s"}}})
	if _, err := st.EnqueueAll(ctx, p); err != nil {
		t.Fatalf("EnqueueAll: %v", err)
	}
	same := func(what string, got []byte) {
		t.Helper()
		if !bytes.Equal(got, payload) {
			t.Fatalf("%s: a payload of %d bytes, want the %d sent", what, len(got), len(payload))
		}
	}

	ms := peekAll(t, ctx, st, qs[0])
	if len(ms) != 1 {
		t.Fatalf("peek holds %d messages, want 1", len(ms))
	}
	same("Peek", ms[0].Payload)
	ls := lease(t, ctx, st, qs[0], 10, long)
	if len(ls) != 1 {
		t.Fatalf("lease took %d messages, want 1", len(ls))
	}
	same("Lease", ls[0].Payload)
	settleOK(t, ctx, st, store.SettleParams{Queue: qs[0], Action: store.Complete}, ls...)

	ls = lease(t, ctx, st, qs[1], 10, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: qs[1], Action: store.Defer}, ls...)
	same("LeaseDeferred", leaseDeferred(t, st, qs[1], long, ls[0].Seq)[0].Payload)

	ls = lease(t, ctx, st, qs[2], 10, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: qs[2], Action: store.DeadLetter, Reason: "r"}, ls...)
	ds := deadAll(t, ctx, st, qs[2])
	if len(ds) != 1 {
		t.Fatalf("dead letters: %d, want 1", len(ds))
	}
	same("PeekDeadLetters", ds[0].Payload)
	dl := leaseDead(t, st, qs[2], 10, long)
	if len(dl) != 1 {
		t.Fatalf("LeaseDeadLetters took %d, want 1", len(dl))
	}
	same("LeaseDeadLetters", dl[0].Payload)
	settleDead(t, st, qs[2], store.Abandon, dl...)
	seqs, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: qs[2], Seqs: []int64{ds[0].Seq}})
	if err != nil {
		t.Fatalf("ResubmitDeadLetters: %v", err)
	}
	ls = lease(t, ctx, st, qs[2], 10, long)
	if len(ls) != 1 || ls[0].Seq != seqs[0] {
		t.Fatalf("lease after resubmit took %v, want message %d", leasedSeqs(ls), seqs[0])
	}
	same("a resubmitted dead letter", ls[0].Payload)

	// A queue that holds its own copy of the payload is not affected.
	enqueue(t, ctx, st, qs[3], store.NewMessage{Payload: payload})
	for _, m := range peekAll(t, ctx, st, qs[3]) {
		same("Peek of a queue with a copy and an own message", m.Payload)
	}

	l := accept(t, st, sessions, "s", long)
	got := leaseIn(t, st, sessions, l, 10)
	if len(got) != 1 {
		t.Fatalf("session lease took %d, want 1", len(got))
	}
	same("a session's lease", got[0].Payload)
}

// A shared body lives while a message or dead letter refers to it, and
// an eviction pass deletes it once none does; deleting a queue deletes
// the bodies only its messages referred to.
func testSharedBodiesSwept(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	a := createQueue(t, ctx, st, store.QueueSettings{})
	b := createQueue(t, ctx, st, store.QueueSettings{})
	payload := bigPayload(64 << 10)
	sharedSend(t, st, payload, a, b)
	evict := func(q string) store.EvictResult {
		t.Helper()
		res, err := evict(ctx, st, q)
		if err != nil {
			t.Fatalf("Evict(%s): %v", q, err)
		}
		return res
	}
	if res := evict(a); res.Bodies != 0 {
		t.Fatalf("an eviction while both copies wait deleted %d bodies", res.Bodies)
	}
	ls := lease(t, ctx, st, a, 10, long)
	if len(ls) != 2 {
		t.Fatalf("lease of a took %d, want 2", len(ls))
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: a, Action: store.Complete}, ls...)
	if res := evict(a); res.Bodies != 0 {
		t.Fatalf("an eviction while b's copy waits deleted %d bodies", res.Bodies)
	}
	ls = lease(t, ctx, st, b, 10, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: b, Action: store.DeadLetter, Reason: "r"}, ls...)
	if res := evict(a); res.Bodies != 0 {
		t.Fatalf("an eviction while b's dead letter refers to the body deleted %d bodies", res.Bodies)
	}
	if ds := deadAll(t, ctx, st, b); len(ds) != 1 || !bytes.Equal(ds[0].Payload, payload) {
		t.Fatalf("b's dead letter after a sweep: %d dead letters", len(ds))
	}
	dl := leaseDead(t, st, b, 10, long)
	settleDead(t, st, b, store.Complete, dl...)
	if res := evict(a); res.Bodies != 1 {
		t.Fatalf("an eviction once nothing refers to the body deleted %d bodies, want 1", res.Bodies)
	}
	if res := evict(b); res.Bodies != 0 {
		t.Fatalf("a second sweep deleted %d bodies, want 0", res.Bodies)
	}

	// Deleting the last queue that refers to a body deletes the body.
	c := createQueue(t, ctx, st, store.QueueSettings{})
	d := createQueue(t, ctx, st, store.QueueSettings{})
	sharedSend(t, st, payload, c, d)
	for _, q := range []string{c, d} {
		if err := st.DeleteQueue(ctx, q); err != nil {
			t.Fatalf("DeleteQueue: %v", err)
		}
	}
	if res := evict(a); res.Bodies != 0 {
		t.Fatalf("after the queues were deleted, a sweep found %d bodies left, want 0", res.Bodies)
	}

	// Expired copies go with their messages.
	e := createQueue(t, ctx, st, store.QueueSettings{})
	f := createQueue(t, ctx, st, store.QueueSettings{})
	p := &store.EnqueueAllParams{}
	for _, q := range []string{e, f} {
		p.Batches = append(p.Batches, store.EnqueueParams{Queue: q, Messages: []store.NewMessage{{Payload: payload, TTL: time.Millisecond}}})
	}
	if _, err := st.EnqueueAll(ctx, p); err != nil {
		t.Fatalf("EnqueueAll: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	gone := int64(0)
	for gone == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the body of two expired copies was not deleted")
		}
		// Either pass may be the one that finds the body unused.
		gone += evict(e).Bodies + evict(f).Bodies
		time.Sleep(5 * time.Millisecond)
	}
	wantEmpty(t, ctx, st, e)
}
