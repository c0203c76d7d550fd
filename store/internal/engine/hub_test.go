package engine

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// TestSignalRemote checks that a hub acts on another hub's payloads only:
// its own echo and ill-formed payloads wake no one.
func TestSignalRemote(t *testing.T) {
	h, other := NewHub(), NewHub()
	key := "q|svc|prov|orders"
	wake, stop := h.Watch(key)
	defer stop()
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	for _, p := range []string{
		h.NotifyPayload(key),
		key,
		"",
		other.NotifyPayload("x|svc|prov|orders"),
		other.NotifyPayload("q|svc|prov"),
	} {
		h.SignalRemote(p)
		if woken() {
			t.Errorf("payload %q woke a watcher", p)
		}
	}
	h.SignalRemote(other.NotifyPayload(key))
	if !woken() {
		t.Error("another hub's payload did not wake the watcher")
	}
}

// TestTailKeepsOneRun checks that a tail hands over one run of positions:
// records that do not follow the last one kept (committers finishing out
// of order) and signals make the follower read instead.
func TestTailKeepsOneRun(t *testing.T) {
	h := NewHub()
	key := "p|svc|prov|3"
	tail := h.Tail(key)
	defer tail.Stop()
	run := func(from, to int64) func() []sluicetype.Record {
		return func() []sluicetype.Record {
			var rs []sluicetype.Record
			for p := from; p <= to; p++ {
				rs = append(rs, sluicetype.Record{Position: p, Payload: []byte("x")})
			}
			return rs
		}
	}
	take := func(want []int64, wantRead bool) {
		t.Helper()
		select {
		case <-tail.Ready():
		default:
			t.Fatal("the tail was not woken")
		}
		recs, read := tail.Take()
		var got []int64
		for _, r := range recs {
			got = append(got, r.Position)
		}
		if !slices.Equal(got, want) || read != wantRead {
			t.Fatalf("Take = %v, read %v; want %v, read %v", got, read, want, wantRead)
		}
	}
	h.Appended(key, run(5, 6))
	h.Appended(key, run(7, 8))
	h.Appended("p|svc|prov|4", run(1, 1))
	take([]int64{5, 6, 7, 8}, false)

	h.Appended(key, run(11, 12))
	h.Appended(key, run(9, 10)) // finished after a later group
	h.Appended(key, run(13, 13))
	take([]int64{11, 12}, true)

	h.Appended(key, run(14, 14))
	h.Signal(key)
	take([]int64{14}, true)

	tail.Stop()
	h.Appended(key, run(15, 15))
	if recs, read := tail.Take(); len(recs) != 0 || read {
		t.Fatalf("a stopped tail took %d records, read %v", len(recs), read)
	}
}

// Dead-letterings reach the observers of their tenant only, added up by
// queue and reason, and none after stop.
func TestHubDeadLettered(t *testing.T) {
	h := NewHub()
	a, b := store.Tenant{Service: "a", Provider: "p"}, store.Tenant{Service: "b", Provider: "p"}
	var got []store.DeadLettered
	stop := h.ObserveDeadLetters(a, func(d store.DeadLettered) { got = append(got, d) })
	otherCalled := false
	defer h.ObserveDeadLetters(b, func(store.DeadLettered) { otherCalled = true })()
	h.DeadLettered([]store.DeadLettered{
		{Tenant: a, Queue: "q", Reason: "r", Count: 2}, {Tenant: a, Queue: "q", Reason: "s", Count: 1},
		{Tenant: a, Queue: "q", Reason: "r", Count: 3},
	})
	want := []store.DeadLettered{{Tenant: a, Queue: "q", Reason: "r", Count: 5}, {Tenant: a, Queue: "q", Reason: "s", Count: 1}}
	if !slices.Equal(got, want) || otherCalled {
		t.Fatalf("observed %v (the other tenant's observer called: %v), want %v", got, otherCalled, want)
	}
	stop()
	h.DeadLettered([]store.DeadLettered{{Tenant: a, Queue: "q", Reason: "r", Count: 1}})
	if len(got) != 2 {
		t.Fatalf("observed after stop: %v", got)
	}
}
