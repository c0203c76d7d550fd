package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// entityTests cover what the queue layer builds on beyond plain leases:
// settings it updates and lists, headers, deferral, cancelling schedules
// and changing properties on settle.
var entityTests = []suiteTest{
	{"Update", testUpdate},
	{"List", testList},
	{"Headers", testHeaders},
	{"Defer", testDefer},
	{"DeferredLeaseEnds", testDeferredLeaseEnds},
	{"DeferredExhausted", testDeferredExhausted},
	{"DeferredNeverExpires", testDeferredNeverExpires},
	{"LeaseDeferredAtomic", testLeaseDeferredAtomic},
	{"CancelScheduled", testCancelScheduled},
	{"SettleProperties", testSettleProperties},
	{"EnqueueAll", testEnqueueAll},
	{"RoutedSchedules", testRoutedSchedules},
	{"LeaseDeadLetters", testLeaseDeadLetters},
	{"EnqueueAllArrivals", testEnqueueAllArrivals},
}

func testUpdate(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 3, Attributes: []byte(`{"a":1}`)})
	enqueue(t, ctx, st, q, msgs("1", "2")...)
	want := store.QueueSettings{
		Name: q, MaxDeliveryCount: 7, DefaultTTL: time.Hour, DeadLetterOnExpiry: true,
		DeadLetterRetention: time.Minute, EvictionInterval: time.Second, EvictionBatch: 9,
		Attributes: []byte(`{"a":2}`),
	}
	for i := 0; i < 2; i++ { // the second time changes nothing, and still succeeds
		if err := st.UpdateQueue(ctx, &want); err != nil {
			t.Fatalf("UpdateQueue #%d: %v", i+1, err)
		}
	}
	got, err := st.GetQueue(ctx, q)
	if err != nil {
		t.Fatalf("GetQueue: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetQueue after UpdateQueue = %+v, want %+v", got, want)
	}
	wantSeqs(t, "messages after UpdateQueue", messageSeqs(peekAll(t, ctx, st, q)), []int64{1, 2})
	if seqs := enqueue(t, ctx, st, q, msg("3")); seqs[0] != 3 {
		t.Fatalf("enqueue after UpdateQueue got sequence number %d, want 3", seqs[0])
	}

	err = st.UpdateQueue(ctx, &store.QueueSettings{Name: "missing-" + randHex(4)})
	wantErr(t, "UpdateQueue of a missing queue", err, sluicetype.ErrQueueNotFound)
	err = st.UpdateQueue(ctx, &store.QueueSettings{Name: q, MaxDeliveryCount: -1})
	wantErr(t, "UpdateQueue with a negative max delivery count", err, sluicetype.ErrInvalidArgument)
	if got, _ := st.GetQueue(ctx, q); got.MaxDeliveryCount != 7 {
		t.Fatalf("a refused UpdateQueue changed MaxDeliveryCount to %d", got.MaxDeliveryCount)
	}
}

func testList(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	other := h.store(t, newTenant())
	createQueue(t, ctx, other, store.QueueSettings{Name: "a-other"})
	var names []string
	for _, n := range []string{"b", "a/x", "c.1", "a", "b-2"} {
		names = append(names, createQueue(t, ctx, st, store.QueueSettings{Name: n, Attributes: []byte(`"` + n + `"`)}))
	}
	want := []string{"a", "a/x", "b", "b-2", "c.1"}
	var got []string
	after := ""
	for page := 0; ; page++ {
		qs, err := st.ListQueues(ctx, &store.ListParams{After: after, Max: 2})
		if err != nil {
			t.Fatalf("ListQueues(after %q): %v", after, err)
		}
		if len(qs) > 2 {
			t.Fatalf("ListQueues(max 2) returned %d", len(qs))
		}
		if len(qs) == 0 {
			break
		}
		for _, q := range qs {
			if string(q.Attributes) != `"`+q.Name+`"` || q.MaxDeliveryCount != store.DefaultMaxDeliveryCount {
				t.Fatalf("ListQueues: queue %q came with settings %+v", q.Name, q)
			}
			got = append(got, q.Name)
		}
		after = qs[len(qs)-1].Name
		if page > len(names) {
			t.Fatalf("ListQueues does not end: %v", got)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListQueues pages = %v, want %v (another tenant's queues left out)", got, want)
	}
	_, err := st.ListQueues(ctx, &store.ListParams{Max: 0})
	wantErr(t, "ListQueues of 0", err, sluicetype.ErrInvalidArgument)
	testListPrefix(t, ctx, st)
}

// testListPrefix checks ListQueues of the names with a prefix, from the
// queues testList created.
func testListPrefix(t *testing.T, ctx context.Context, st store.Store) {
	for _, c := range []struct {
		prefix, after string
		want          []string
	}{
		{"a", "", []string{"a", "a/x"}},
		{"a/", "", []string{"a/x"}},
		{"a", "a", []string{"a/x"}},
		{"b-", "", []string{"b-2"}},
		{"b", "", []string{"b", "b-2"}},
		{"c.1", "", []string{"c.1"}},
		{"", "b", []string{"b-2", "c.1"}},
		{"z", "", nil},
		{"a", "b", nil},
	} {
		qs, err := st.ListQueues(ctx, &store.ListParams{Prefix: c.prefix, After: c.after, Max: 10})
		if err != nil {
			t.Fatalf("ListQueues(prefix %q, after %q): %v", c.prefix, c.after, err)
		}
		var got []string
		for _, q := range qs {
			got = append(got, q.Name)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ListQueues(prefix %q, after %q) = %v, want %v", c.prefix, c.after, got, c.want)
		}
	}
	_, err := st.ListQueues(ctx, &store.ListParams{Prefix: strings.Repeat("p", store.MaxNameLen+1), Max: 1})
	wantErr(t, "ListQueues with a prefix too long", err, sluicetype.ErrInvalidArgument)
}

func testHeaders(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	headers := map[string]string{"correlation-id": "c-1", "subject": "ünïcode", "reply-to": "replies"}
	props := map[string]string{"k": "v"}
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("h"), Headers: headers, Properties: props},
		msg("plain"))
	check := func(what string, got map[string]string, want map[string]string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: headers %v, want %v", what, got, want)
		}
	}
	p := peekAll(t, ctx, st, q)
	check("Peek", p[0].Headers, headers)
	check("Peek of a message without headers", p[1].Headers, nil)
	ls := lease(t, ctx, st, q, 2, long)
	check("Lease", ls[0].Headers, headers)
	if !reflect.DeepEqual(ls[0].Properties, props) {
		t.Fatalf("Lease: properties %v, want %v", ls[0].Properties, props)
	}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "r"}, ls[0])
	d := deadAll(t, ctx, st, q)
	check("PeekDeadLetters", d[0].Headers, headers)
	seqs, err := st.ResubmitDeadLetters(ctx, &store.ResubmitParams{Queue: q, Seqs: []int64{d[0].Seq}})
	if err != nil {
		t.Fatalf("ResubmitDeadLetters: %v", err)
	}
	for _, m := range peekAll(t, ctx, st, q) {
		if m.Seq == seqs[0] {
			check("a resubmitted message", m.Headers, headers)
			return
		}
	}
	t.Fatalf("resubmitted message %d not found", seqs[0])
}

// leaseDeferred leases deferred messages by sequence number.
func leaseDeferred(t *testing.T, st store.Store, q string, vis time.Duration, seqs ...int64) []sluicetype.Leased {
	t.Helper()
	ls, err := st.LeaseDeferred(t.Context(), &store.LeaseDeferredParams{Queue: q, Seqs: seqs, Visibility: vis})
	if err != nil {
		t.Fatalf("LeaseDeferred(%v): %v", seqs, err)
	}
	if len(ls) != len(seqs) {
		t.Fatalf("LeaseDeferred(%v) returned %d messages", seqs, len(ls))
	}
	for i, l := range ls {
		if l.Seq != seqs[i] || l.Receipt.Seq != seqs[i] {
			t.Fatalf("LeaseDeferred(%v): message %d is %d, want them in the order asked", seqs, i, l.Seq)
		}
	}
	return ls
}

func testDefer(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2", "3")...)
	ls := lease(t, ctx, st, q, 3, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, ls[0], ls[2])
	settleLost(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, ls[0].Receipt)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, ls[1])
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Deferred: 2})
	if got := lease(t, ctx, st, q, 10, long); len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("Lease with messages 1 and 3 deferred = %v, want only 2", leasedSeqs(got))
	}

	d := leaseDeferred(t, st, q, long, 3, 1)
	if d[0].DeliveryCount != 2 || string(d[0].Payload) != "3" || d[0].State != sluicetype.StateLeased {
		t.Fatalf("LeaseDeferred: %+v, want delivery count 2, payload 3, leased", d[0].Message)
	}
	// An abandoned deferred message is deferred again.
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, d[0])
	wantCounts(t, ctx, st, q, store.QueueStats{InFlight: 2, Deferred: 1})
	if got := lease(t, ctx, st, q, 10, long); len(got) != 0 {
		t.Fatalf("Lease after abandoning a deferred message = %v, want none", leasedSeqs(got))
	}
	_, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: []int64{1}, Visibility: long})
	wantErr(t, "LeaseDeferred of a message leased already", err, sluicetype.ErrMessageNotFound)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, d[1])
	again := leaseDeferred(t, st, q, long, 3)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, again...)
	wantSeqs(t, "messages left", messageSeqs(peekAll(t, ctx, st, q)), []int64{2})
}

func testDeferredLeaseEnds(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msg("d"))
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, lease(t, ctx, st, q, 1, long)...)
	d := leaseDeferred(t, st, q, 200*time.Millisecond, 1)
	time.Sleep(300 * time.Millisecond)
	// Straight after the lease ended, before any other call resolved it.
	wantCounts(t, ctx, st, q, store.QueueStats{Deferred: 1})
	again := leaseDeferred(t, st, q, 200*time.Millisecond, 1)
	if again[0].DeliveryCount != 3 {
		t.Fatalf("deferred message leased a third time with delivery count %d", again[0].DeliveryCount)
	}
	settleLost(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, d[0].Receipt)
	time.Sleep(300 * time.Millisecond)
	// A lease resolves ended leases: the message must not come back ready.
	if got := lease(t, ctx, st, q, 10, long); len(got) != 0 {
		t.Fatalf("Lease after a deferred message's lease ended = %v, want none", leasedSeqs(got))
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Deferred: 1})
}

func testDeferredExhausted(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{MaxDeliveryCount: 2})
	enqueue(t, ctx, st, q, msg("d"))
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, lease(t, ctx, st, q, 1, long)...)
	d := leaseDeferred(t, st, q, long, 1)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, d...)
	dead := deadAll(t, ctx, st, q)
	if len(dead) != 1 || dead[0].Reason != sluicetype.ReasonMaxDeliveryCountExceeded {
		t.Fatalf("dead letters after abandoning a deferred message on its last delivery: %+v", dead)
	}
}

// A deferred message never expires (Service Bus: its owner holds its
// number): not by eviction, not when a lease by number ends or is
// abandoned, and it can still be received by number and completed.
func testDeferredNeverExpires(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{DeadLetterOnExpiry: true, DefaultTTL: time.Hour})
	ttl := 300 * time.Millisecond
	enqueue(t, ctx, st, q, store.NewMessage{Payload: []byte("d"), TTL: ttl}, store.NewMessage{Payload: []byte("e"), TTL: ttl})
	start := time.Now()
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, lease(t, ctx, st, q, 2, long)...)
	sleepUntil(t, start.Add(ttl+200*time.Millisecond))
	if _, err := evict(ctx, st, q); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Deferred: 2})
	// Abandoned after its TTL: deferred again, not expired.
	d := leaseDeferred(t, st, q, long, 1)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon}, d...)
	// A lease by number that ends after the TTL: deferred again too.
	leaseDeferred(t, st, q, 100*time.Millisecond, 2)
	eventually(t, "the ended lease resolved", func() bool {
		if _, err := evict(ctx, st, q); err != nil {
			t.Fatal(err)
		}
		return stats(t, ctx, st, q).Deferred == 2
	})
	wantCounts(t, ctx, st, q, store.QueueStats{Deferred: 2})
	if got := lease(t, ctx, st, q, 10, long); len(got) != 0 {
		t.Fatalf("Lease took deferred messages %v", leasedSeqs(got))
	}
	both := leaseDeferred(t, st, q, long, 1, 2)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Complete}, both...)
	wantEmpty(t, ctx, st, q)
}

func testLeaseDeferredAtomic(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q, msgs("1", "2")...)
	ls := lease(t, ctx, st, q, 1, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer}, ls...)
	for _, seqs := range [][]int64{{1, 2}, {1, 99}} {
		_, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: seqs, Visibility: long})
		wantErr(t, fmt.Sprintf("LeaseDeferred(%v) naming a message that is not deferred", seqs), err, sluicetype.ErrMessageNotFound)
	}
	wantCounts(t, ctx, st, q, store.QueueStats{Active: 1, Deferred: 1})
	_, err := st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: "missing-" + randHex(4), Seqs: []int64{1}, Visibility: long})
	wantErr(t, "LeaseDeferred on a missing queue", err, sluicetype.ErrQueueNotFound)
	_, err = st.LeaseDeferred(ctx, &store.LeaseDeferredParams{Queue: q, Seqs: []int64{1, 1}, Visibility: long})
	wantErr(t, "LeaseDeferred naming a message twice", err, sluicetype.ErrInvalidArgument)
}

func testCancelScheduled(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	later := time.Now().Add(time.Hour)
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("later-1"), VisibleAt: later},
		store.NewMessage{Payload: []byte("later-2"), VisibleAt: later},
		msg("now"))
	cancel := func(seqs ...int64) error {
		return st.CancelScheduled(ctx, &store.CancelParams{Queue: q, Seqs: seqs})
	}
	if err := cancel(1); err != nil {
		t.Fatalf("CancelScheduled(1): %v", err)
	}
	wantErr(t, "CancelScheduled of a cancelled message", cancel(1), sluicetype.ErrMessageNotFound)
	wantErr(t, "CancelScheduled naming a message that is not scheduled", cancel(2, 3), sluicetype.ErrMessageNotFound)
	wantErr(t, "CancelScheduled naming no message", cancel(2, 42), sluicetype.ErrMessageNotFound)
	wantSeqs(t, "messages after refused cancels", messageSeqs(peekAll(t, ctx, st, q)), []int64{2, 3})

	// A message held back by an abandon with a delay was delivered: it is
	// not a scheduled send and cannot be cancelled.
	ls := lease(t, ctx, st, q, 1, long)
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Delay: time.Hour}, ls...)
	wantErr(t, "CancelScheduled of an abandoned message", cancel(3), sluicetype.ErrMessageNotFound)
	if err := cancel(2); err != nil {
		t.Fatalf("CancelScheduled(2): %v", err)
	}
	wantSeqs(t, "messages after cancels", messageSeqs(peekAll(t, ctx, st, q)), []int64{3})
	err := st.CancelScheduled(ctx, &store.CancelParams{Queue: "missing-" + randHex(4), Seqs: []int64{1}})
	wantErr(t, "CancelScheduled on a missing queue", err, sluicetype.ErrQueueNotFound)
}

func testSettleProperties(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, q,
		store.NewMessage{Payload: []byte("a"), Properties: map[string]string{"n": "1", "keep": "k"}},
		store.NewMessage{Payload: []byte("b"), Properties: map[string]string{"n": "1"}},
		store.NewMessage{Payload: []byte("c"), Properties: map[string]string{"n": "1"}})
	ls := lease(t, ctx, st, q, 3, long)
	changed := map[string]string{"n": "2", "keep": "k"}
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Abandon, Properties: changed}, ls[0])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.DeadLetter, Reason: "bad",
		Properties: map[string]string{"why": "x"}}, ls[1])
	settleOK(t, ctx, st, store.SettleParams{Queue: q, Action: store.Defer, Properties: map[string]string{}}, ls[2])

	again := lease(t, ctx, st, q, 1, long)
	if len(again) != 1 || !reflect.DeepEqual(again[0].Properties, changed) {
		t.Fatalf("abandoned message leased again with properties %v, want %v", again[0].Properties, changed)
	}
	if d := deadAll(t, ctx, st, q); len(d) != 1 || !reflect.DeepEqual(d[0].Properties, map[string]string{"why": "x"}) {
		t.Fatalf("dead letter properties: %+v", d)
	}
	if d := leaseDeferred(t, st, q, long, 3); len(d[0].Properties) != 0 {
		t.Fatalf("deferred with empty properties, leased with %v", d[0].Properties)
	}
	_, err := st.Settle(ctx, &store.SettleParams{Queue: q, Action: store.Complete, Properties: changed,
		Receipts: []sluicetype.Receipt{again[0].Receipt}})
	if !errors.Is(err, sluicetype.ErrInvalidArgument) {
		t.Fatalf("Complete with properties: %v, want ErrInvalidArgument", err)
	}
}

func testEnqueueAll(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	a := createQueue(t, ctx, st, store.QueueSettings{})
	b := createQueue(t, ctx, st, store.QueueSettings{})
	enqueue(t, ctx, st, b, msg("b0"))
	dead := msg("unroutable")
	dead.DeadLetterReason, dead.DeadLetterDescription = "FilterEvaluationException", "bad filter"
	got, err := st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{
		{Queue: b, Messages: msgs("b1", "b2")},
		{Queue: a, Messages: []store.NewMessage{msg("a1"), dead}},
	}})
	if err != nil {
		t.Fatalf("EnqueueAll: %v", err)
	}
	if !reflect.DeepEqual(got.Seqs, [][]int64{{2, 3}, {1, 2}}) || got.Routed != nil {
		t.Fatalf("EnqueueAll numbers = %v, want [[2 3] [1 2]] (in the order of the batches)", got)
	}
	wantSeqs(t, "queue a", messageSeqs(peekAll(t, ctx, st, a)), []int64{1})
	if d := deadAll(t, ctx, st, a); len(d) != 1 || d[0].Seq != 2 || d[0].Reason != "FilterEvaluationException" || d[0].Description != "bad filter" {
		t.Fatalf("dead letters of a: %+v", d)
	}
	// All or nothing: a missing queue undoes the other batches.
	_, err = st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{
		{Queue: a, Messages: msgs("a2")}, {Queue: "missing-" + randHex(3), Messages: msgs("x")},
	}})
	wantErr(t, "EnqueueAll with a missing queue", err, sluicetype.ErrQueueNotFound)
	wantSeqs(t, "queue a after a refused EnqueueAll", messageSeqs(peekAll(t, ctx, st, a)), []int64{1})
	_, err = st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{
		{Queue: a, Messages: msgs("1")}, {Queue: a, Messages: msgs("2")},
	}})
	wantErr(t, "EnqueueAll naming a queue twice", err, sluicetype.ErrInvalidArgument)
	if seqs := enqueue(t, ctx, st, a, msg("next")); seqs[0] != 3 {
		t.Fatalf("next number after EnqueueAll = %d, want 3 (gap-free)", seqs[0])
	}

	// Racing EnqueueAlls share groups: the one naming a missing queue
	// fails whole, and the others all commit.
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			second := b
			if i == 5 {
				second = "missing-" + randHex(3)
			}
			_, errs[i] = st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: []store.EnqueueParams{
				{Queue: a, Messages: msgs("race")}, {Queue: second, Messages: msgs("race")},
			}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 5) != (err != nil) {
			t.Fatalf("racing EnqueueAll %d: %v", i, err)
		}
	}
	for q, want := range map[string]int{a: 1 + 1 + 15, b: 3 + 15} {
		if got := len(peekAll(t, ctx, st, q)); got != want {
			t.Fatalf("queue %s holds %d messages after the race, want %d", q, got, want)
		}
	}
}

// A routed send numbers its scheduled messages on the queue it was sent
// to, and CancelScheduled on that queue cancels their copies.
func testRoutedSchedules(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	topic := createQueue(t, ctx, st, store.QueueSettings{})
	c1 := createQueue(t, ctx, st, store.QueueSettings{})
	c2 := createQueue(t, ctx, st, store.QueueSettings{})
	later := time.Now().Add(time.Hour)
	scheduled := func(p string) store.NewMessage {
		m := msg(p)
		m.VisibleAt = later
		return m
	}
	dead := scheduled("s1")
	dead.DeadLetterReason = "FilterEvaluationException"
	send := func(batches []store.EnqueueParams, at []time.Time, origins [][]int) (store.EnqueueAllResult, error) {
		return st.EnqueueAll(ctx, &store.EnqueueAllParams{Batches: batches,
			Routed: &store.RoutedSend{Queue: topic, VisibleAt: at, Origins: origins}})
	}
	got, err := send([]store.EnqueueParams{
		{Queue: c1, Messages: []store.NewMessage{msg("now"), scheduled("s1"), scheduled("s2")}},
		{Queue: c2, Messages: []store.NewMessage{dead, scheduled("s2")}},
	}, []time.Time{{}, later, later}, [][]int{{0, 1, 2}, {1, 2}})
	if err != nil {
		t.Fatalf("EnqueueAll routed: %v", err)
	}
	if !reflect.DeepEqual(got.Seqs, [][]int64{{1, 2, 3}, {1, 2}}) || !reflect.DeepEqual(got.Routed, []int64{0, 1, 2}) {
		t.Fatalf("EnqueueAll routed = %+v, want copies [[1 2 3] [1 2]] and routed numbers [0 1 2]", got)
	}
	wantErr(t, "cancelling a message sent now", st.CancelScheduled(ctx, &store.CancelParams{Queue: topic, Seqs: []int64{1, 3}}), sluicetype.ErrMessageNotFound)
	if err := st.CancelScheduled(ctx, &store.CancelParams{Queue: topic, Seqs: []int64{1}}); err != nil {
		t.Fatalf("CancelScheduled of a routed send: %v", err)
	}
	wantSeqs(t, "c1 after the cancel", messageSeqs(peekAll(t, ctx, st, c1)), []int64{1, 3})
	wantSeqs(t, "c2 after the cancel", messageSeqs(peekAll(t, ctx, st, c2)), []int64{2})
	if d := deadAll(t, ctx, st, c2); len(d) != 1 {
		t.Fatalf("c2's dead-lettered copy: %+v, want it kept", d)
	}

	// A send with no copies, and a plain message of the routed queue,
	// cancelled together with a routed send.
	none, err := send(nil, []time.Time{later}, nil)
	if err != nil || !reflect.DeepEqual(none.Routed, []int64{3}) {
		t.Fatalf("EnqueueAll routed with no copies = %+v, %v; want routed number 3", none, err)
	}
	own := enqueue(t, ctx, st, topic, scheduled("own"))
	if own[0] != 4 {
		t.Fatalf("the routed queue's own message got %d, want 4: numbers are shared", own[0])
	}
	if err := st.CancelScheduled(ctx, &store.CancelParams{Queue: topic, Seqs: []int64{4, 3, 2}}); err != nil {
		t.Fatalf("CancelScheduled of routed and own messages: %v", err)
	}
	wantSeqs(t, "c1 after every cancel", messageSeqs(peekAll(t, ctx, st, c1)), []int64{1})
	wantSeqs(t, "c2 after every cancel", messageSeqs(peekAll(t, ctx, st, c2)), nil)
	wantSeqs(t, "the routed queue after every cancel", messageSeqs(peekAll(t, ctx, st, topic)), nil)

	// Racing cancels of one send: one wins, the other finds nothing.
	race, err := send([]store.EnqueueParams{{Queue: c1, Messages: []store.NewMessage{scheduled("r")}}}, []time.Time{later}, [][]int{{0}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = st.CancelScheduled(ctx, &store.CancelParams{Queue: topic, Seqs: race.Routed})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, sluicetype.ErrMessageNotFound):
			t.Fatalf("racing cancel: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing cancels of one send succeeded, want 1", won)
	}

	// What a routed send must account for.
	for _, bad := range []struct {
		what    string
		at      []time.Time
		origins [][]int
	}{
		{"no sent messages", nil, [][]int{{0}}},
		{"origins for no batch", []time.Time{later}, nil},
		{"an origin too many", []time.Time{later}, [][]int{{0, 0}}},
		{"an origin out of range", []time.Time{later}, [][]int{{1}}},
	} {
		_, err := send([]store.EnqueueParams{{Queue: c1, Messages: msgs("x")}}, bad.at, bad.origins)
		wantErr(t, "routed send with "+bad.what, err, sluicetype.ErrInvalidArgument)
	}
	wantSeqs(t, "c1 after refused sends", messageSeqs(peekAll(t, ctx, st, c1)), []int64{1})
}

func leaseDead(t *testing.T, st store.Store, q string, max int, vis time.Duration) []sluicetype.DeadLetter {
	t.Helper()
	ds, err := st.LeaseDeadLetters(t.Context(), &store.LeaseParams{Queue: q, Max: max, Visibility: vis})
	if err != nil {
		t.Fatalf("LeaseDeadLetters: %v", err)
	}
	return ds
}

func settleDead(t *testing.T, st store.Store, q string, a store.SettleAction, ds ...sluicetype.DeadLetter) []store.SettleResult {
	t.Helper()
	p := store.SettleParams{Queue: q, Action: a, Extension: long}
	for _, d := range ds {
		p.Receipts = append(p.Receipts, d.Receipt)
	}
	res, err := st.SettleDeadLetters(t.Context(), &p)
	if err != nil {
		t.Fatalf("SettleDeadLetters(%s): %v", a, err)
	}
	return res
}

func testLeaseDeadLetters(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	q := createQueue(t, ctx, st, store.QueueSettings{})
	deadLetterAll(t, st, q, msgs("1", "2", "3")...)
	first := leaseDead(t, st, q, 2, long)
	if len(first) != 2 || first[0].Seq != 1 || first[1].Seq != 2 || first[0].Reason != "r" || first[0].Receipt.Token == 0 {
		t.Fatalf("LeaseDeadLetters(2) = %+v", first)
	}
	// A lease of a second, which the calls before its end leave room for
	// on a loaded machine (with 200 ms, CI once saw it end before the
	// abandon's lease below, which then took it too).
	const brief = time.Second
	secondAt := time.Now()
	second := leaseDead(t, st, q, 10, brief)
	if len(second) != 1 || second[0].Seq != 3 {
		t.Fatalf("LeaseDeadLetters passing over locked ones = %v", deadSeqs(second))
	}
	if got := leaseDead(t, st, q, 10, long); len(got) != 0 {
		t.Fatalf("LeaseDeadLetters with all locked = %v", deadSeqs(got))
	}
	for _, r := range settleDead(t, st, q, store.Complete, first[0]) {
		if r.Err != nil {
			t.Fatalf("complete: %v", r.Err)
		}
	}
	settleDead(t, st, q, store.Abandon, first[1])
	if got := leaseDead(t, st, q, 10, long); len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("after abandon, leased %v", deadSeqs(got))
	}
	sleepUntil(t, secondAt.Add(brief+100*time.Millisecond))
	if r := settleDead(t, st, q, store.Complete, second[0]); !errors.Is(r[0].Err, sluicetype.ErrLockLost) {
		t.Fatalf("complete after the lock ended: %v", r[0].Err)
	}
	again := leaseDead(t, st, q, 10, long)
	if len(again) != 1 || again[0].Seq != 3 {
		t.Fatalf("after the lock ended, leased %v", deadSeqs(again))
	}
	if r := settleDead(t, st, q, store.Extend, again[0]); r[0].Err != nil || r[0].LockedUntil.IsZero() {
		t.Fatalf("extend: %+v", r[0])
	}
	_, err := st.SettleDeadLetters(ctx, &store.SettleParams{Queue: q, Action: store.Defer, Receipts: []sluicetype.Receipt{again[0].Receipt}})
	wantErr(t, "defer of a dead letter", err, sluicetype.ErrInvalidArgument)
	if d := deadAll(t, ctx, st, q); len(d) != 2 {
		t.Fatalf("%d dead letters left, want 2", len(d))
	}
}
