package stream

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// newView is a subscription to one stream (key "" for its namespace) at
// a cursor, with no consumer.
func newView(ns, key string, cursor int64) *subState {
	s := &subState{sub: store.Subscription{Namespace: ns, Key: key}, cursor: cursor, saved: cursor,
		resolved: make(map[int64]bool), streams: make(map[string]*streamQueue)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// keyed returns records from..to of namespace ns, whose keys come from
// key(position).
func keyed(ns string, from, to int64, key func(int64) string) []sluicetype.Record {
	var out []sluicetype.Record
	for p := from; p <= to; p++ {
		out = append(out, sluicetype.Record{Position: p, Namespace: ns, Key: key(p), Payload: make([]byte, 10)})
	}
	return out
}

// A view walks its cursor over what the cache holds, queues its own
// streams' events in order, hands out one event per stream at a time,
// and keeps its safe position before its earliest unresolved event.
func TestViewWalkQueueSafe(t *testing.T) {
	w := &window{start: 11, end: 10}
	w.add(keyed("ns", 11, 20, func(p int64) string { return []string{"a", "b"}[p%2] }))
	s := newView("ns", "", 10)
	if !s.walk(w, 0) || s.cursor != 20 {
		t.Fatalf("walk: cursor %d, want 20", s.cursor)
	}
	if got := s.safe(); got != 10 {
		t.Fatalf("safe %d with everything unresolved, want 10", got)
	}
	first, ok := s.next() // stream b (11 is odd), or a: whichever is ready first
	if !ok || first.Position != 11 {
		t.Fatalf("next = %v, %v; want position 11", first.Position, ok)
	}
	second, ok := s.next()
	if !ok || second.Position != 12 {
		t.Fatalf("next = %v, %v; want position 12 (the other stream)", second.Position, ok)
	}
	if _, ok := s.next(); ok {
		t.Fatal("a third delivery started while both streams have one in delivery")
	}
	s.delivered(second.Key, second.Position)
	if got := s.safe(); got != 10 {
		t.Fatalf("safe %d with 11 still unresolved, want 10", got)
	}
	s.inflight--
	s.delivered(first.Key, first.Position)
	s.inflight--
	if got := s.safe(); got != 12 {
		t.Fatalf("safe %d after 11 and 12, want 12", got)
	}
	if nx, ok := s.next(); !ok || nx.Position != 13 && nx.Position != 14 {
		t.Fatalf("next = %v, %v; want 13 or 14", nx.Position, ok)
	}
	// A halt goes back to the safe position and drops the queues.
	s.halt(context.Background())
	if s.cursor != 12 || len(s.streams) != 0 || len(s.unresolved) != 0 {
		t.Fatalf("after halt: cursor %d, %d streams, %d unresolved", s.cursor, len(s.streams), len(s.unresolved))
	}
	// A cursor before its window does not move.
	w.dropBelow(16)
	w.start = 16
	if s.walk(w, 0) || s.cursor != 12 {
		t.Fatalf("walk before the window moved the cursor to %d", s.cursor)
	}
	// A view of one stream passes the other's events.
	one := newView("ns", "a", 15)
	one.walk(w, 0)
	if one.cursor != 20 || len(one.unresolved) != 3 || one.unresolved[0] != 16 {
		t.Fatalf("stream a: cursor %d, unresolved %v", one.cursor, one.unresolved)
	}
	// Within a lookahead, a cursor stops that far past its safe position.
	ahead := newView("ns", "", 15)
	ahead.walk(w, 3)
	if ahead.cursor != 18 || ahead.safe() != 15 {
		t.Fatalf("lookahead 3: cursor %d, safe %d; want 18 and 15", ahead.cursor, ahead.safe())
	}
}

// The context deliveries start with is shared while the generation and
// the lease context stay, and ends with either: a lapsed lease cancels
// it with the lease's cause, a halt or a removal with the generation.
func TestViewDeliveryContext(t *testing.T) {
	s := newView("ns", "", 0)
	lease, lapse := context.WithCancelCause(context.Background())
	ctx := s.deliveryCtx(lease)
	if again := s.deliveryCtx(lease); again != ctx {
		t.Fatal("a second delivery under the same lease got a context of its own")
	}
	lapse(errLeaseLapsed)
	select { // the lease's AfterFunc runs in a goroutine of its own
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease lapsed; the delivery context did not end")
	}
	if context.Cause(ctx) != errLeaseLapsed {
		t.Fatalf("after the lease lapsed: cause %v, want errLeaseLapsed", context.Cause(ctx))
	}
	renewed, end := context.WithCancelCause(context.Background())
	defer end(nil)
	ctx = s.deliveryCtx(renewed)
	if ctx.Err() != nil {
		t.Fatalf("under a renewed lease: %v", ctx.Err())
	}
	s.halt(context.Background())
	if ctx.Err() == nil {
		t.Fatal("a halt left its generation's deliveries running")
	}
	ctx = s.deliveryCtx(renewed)
	if ctx.Err() != nil {
		t.Fatalf("after a halt, a new generation's delivery: %v", ctx.Err())
	}
	s.end()
	if ctx.Err() == nil {
		t.Fatal("a removal left deliveries running")
	}
	if context.Cause(ctx) == errLeaseLapsed {
		t.Fatal("a removal's cancellation names the lease")
	}
}
