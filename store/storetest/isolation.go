package storetest

import (
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

var isolationTests = []suiteTest{
	{"Tenants", testTenantIsolation},
	{"TenantNameBoundaries", testTenantNameBoundaries},
}

func testTenantIsolation(t *testing.T, h *harness) {
	ctx := t.Context()
	tnA := newTenant()
	tnB := newTenant()
	tnC := store.Tenant{Service: tnA.Service, Provider: "p2"} // same service, another provider
	a, b, c := h.store(t, tnA), h.store(t, tnB), h.store(t, tnC)
	const q = "shared"

	createQueue(t, ctx, a, store.QueueSettings{Name: q, MaxDeliveryCount: 3})
	createQueue(t, ctx, b, store.QueueSettings{Name: q})
	wantSeqs(t, "A's enqueue", enqueue(t, ctx, a, q, msgs("a1", "a2", "a3")...), span(1, 3))
	wantSeqs(t, "B's enqueue", enqueue(t, ctx, b, q, msgs("b1")...), span(1, 1))
	la := lease(t, ctx, a, q, 2, long)
	settleOK(t, ctx, a, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, la[1])

	if s, _ := b.GetQueue(ctx, q); s.MaxDeliveryCount != store.DefaultMaxDeliveryCount {
		t.Fatalf("B's queue has A's settings: %+v", s)
	}
	_, err := c.GetQueue(ctx, q)
	wantErr(t, "GetQueue in a tenant with the same service and another provider", err, sluicetype.ErrQueueNotFound)

	mb := peekAll(t, ctx, b, q)
	if len(mb) != 1 || string(mb[0].Payload) != "b1" || mb[0].State != sluicetype.StateReady {
		t.Fatalf("B sees %+v, want only its own ready message", mb)
	}
	if d := deadAll(t, ctx, b, q); len(d) != 0 {
		t.Fatalf("B sees A's dead letters: %v", deadSeqs(d))
	}
	wantCounts(t, ctx, b, q, store.QueueStats{Active: 1})
	// A's receipt names seq 1, which B also has; it must not settle B's.
	settleLost(t, ctx, b, store.SettleParams{Queue: q, Action: store.Complete}, la[0].Receipt)
	_, err = b.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{2}})
	wantErr(t, "B resubmitting A's dead letter", err, sluicetype.ErrMessageNotFound)
	if n, err := b.PurgeDeadLetters(ctx, q); err != nil || n != 0 {
		t.Fatalf("B's purge = %d, %v; want 0", n, err)
	}
	wantSeqs(t, "B's lease", leasedSeqs(lease(t, ctx, b, q, 10, long)), []int64{1})
	if err := b.DeleteQueue(ctx, q); err != nil {
		t.Fatalf("B's DeleteQueue: %v", err)
	}
	// A's queue is untouched by all of it.
	ma := peekAll(t, ctx, a, q)
	if len(ma) != 2 || ma[0].State != sluicetype.StateLeased || string(ma[1].Payload) != "a3" {
		t.Fatalf("A's messages after B's work: %+v", ma)
	}
	wantSeqs(t, "A's dead letters", deadSeqs(deadAll(t, ctx, a, q)), []int64{2})
	settleOK(t, ctx, a, store.SettleParams{Queue: q, Action: store.Complete}, la[0])

	// Partition logs and their trims.
	appendRecs(t, a, 0, recs("a", 3)...)
	if res := appendRecs(t, b, 0, recs("b", 1)...); res.First != 1 {
		t.Fatalf("B's first append at position %d, want 1", res.First)
	}
	for _, x := range []struct {
		name string
		st   store.Store
		n    int
	}{{"B", b, 1}, {"C", c, 0}} {
		rs := read(t, x.st, 0, 0, 100)
		if len(rs) != x.n {
			t.Fatalf("%s reads %d records, want %d", x.name, len(rs), x.n)
		}
		for _, r := range rs {
			if string(r.Payload) != "b-0" {
				t.Fatalf("%s reads A's record %q", x.name, r.Payload)
			}
		}
	}
	consume(t, b, 0, 3)
	if n := trimConsumed(t, b, 0, 100); n != 1 {
		t.Fatalf("B's trim = %d; want 1", n)
	}
	wantInfo(t, a, 0, store.PartitionInfo{Head: 3})
	wantSeqs(t, "A's records after B's trim", positions(read(t, a, 0, 0, 100)), span(1, 3))
}

// testTenantNameBoundaries catches backends that join a tenant's names
// into one key without a separator that names cannot hold.
func testTenantNameBoundaries(t *testing.T, h *harness) {
	ctx := t.Context()
	base := "t" + randHex(6)
	pairs := [][2]store.Tenant{
		{{Service: base + "ab", Provider: "c"}, {Service: base + "a", Provider: "bc"}},
		{{Service: base + "a.b", Provider: "c"}, {Service: base + "a", Provider: "b.c"}},
		{{Service: base + "a-b", Provider: "c"}, {Service: base + "a", Provider: "b-c"}},
		{{Service: base + "a_b", Provider: "c"}, {Service: base + "a", Provider: "b_c"}},
	}
	for _, pair := range pairs {
		x, y := h.store(t, pair[0]), h.store(t, pair[1])
		createQueue(t, ctx, x, store.QueueSettings{Name: "q"})
		createQueue(t, ctx, y, store.QueueSettings{Name: "q"})
		enqueue(t, ctx, x, "q", msg("x"))
		appendRecs(t, x, 0, rec("x"))
		if m := peekAll(t, ctx, y, "q"); len(m) != 0 {
			t.Fatalf("tenant %+v sees the messages of tenant %+v", pair[1], pair[0])
		}
		if rs := read(t, y, 0, 0, 10); len(rs) != 0 {
			t.Fatalf("tenant %+v sees the records of tenant %+v", pair[1], pair[0])
		}
	}
}
