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

var streamTests = []suiteTest{
	{"PartitionCount", testPartitionCount},
	{"AcquireFences", testAcquireFences},
	{"FencedWrites", testFencedWrites},
	{"Subscriptions", testStreamSubscriptions},
	{"ListSubscriptions", testListSubscriptions},
	{"SubscriptionHoldsRetention", testSubscriptionHoldsRetention},
	{"Parked", testParked},
	{"TrimConsumed", testTrimConsumed},
	{"SaveProgressBatch", testSaveProgressBatch},
	{"RetentionByAge", testRetentionByAge},
	{"RetentionBySize", testRetentionBySize},
	{"RetentionExpiry", testRetentionExpiry},
	{"RetentionExpiryMixed", testRetentionExpiryMixed},
	{"ParkedRetention", testParkedRetention},
	{"Reposition", testReposition},
	{"RepositionReadConsistent", testRepositionReadConsistent},
}

// The first count recorded is the tenant's, whatever is asked later.
func testPartitionCount(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	for _, n := range []int32{16, 8, 16} {
		got, err := st.StreamPartitions(ctx, n)
		if err != nil || got != 16 {
			t.Fatalf("StreamPartitions(%d) = %d, %v; want the first count, 16", n, got, err)
		}
	}
	other := h.store(t, newTenant())
	if got, err := other.StreamPartitions(ctx, 4); err != nil || got != 4 {
		t.Fatalf("another tenant's StreamPartitions(4) = %d, %v", got, err)
	}
	_, err := st.StreamPartitions(ctx, 0)
	wantErr(t, "StreamPartitions(0)", err, sluicetype.ErrInvalidArgument)
}

// acquire makes node the holder of a partition's lease under a new
// epoch, taking it from whoever holds it, and returns the lease.
func acquire(t *testing.T, st store.Store, node string, partition int32) store.PartitionLease {
	t.Helper()
	ls, err := st.Leases(t.Context())
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	for _, l := range ls {
		if l.Partition == partition && l.Held {
			if err := st.ReleasePartitions(t.Context(), l.Owner, []store.PartitionLease{l}); err != nil {
				t.Fatalf("ReleasePartitions: %v", err)
			}
		}
	}
	got := leasePartitions(t, st, node, long, nil, partition)
	if len(got) != 1 {
		t.Fatalf("%s could not acquire partition %d", node, partition)
	}
	return got[0]
}

// Each acquisition bumps the epoch; progress under an older epoch is
// refused whole, and the checkpoint never moves back.
func testAcquireFences(t *testing.T, h *harness) {
	_, st := h.setup(t)
	sub := newStreamSub(t, st, "ns", "k", 3, 0)
	first := acquire(t, st, "node-a", 3)
	if first.Epoch != 1 || first.Checkpoint != 0 {
		t.Fatalf("first acquisition = %+v; want node-a at epoch 1", first)
	}
	save := func(epoch, checkpoint, pos int64) error {
		return saveProgress(st, store.ProgressParams{Partition: 3, Epoch: epoch, Checkpoint: checkpoint,
			Positions: map[string]int64{sub: pos}})
	}
	if err := save(1, 5, 7); err != nil {
		t.Fatalf("SaveProgress under the owner's epoch: %v", err)
	}
	second := acquire(t, st, "node-b", 3)
	if second.Epoch != 2 || second.Checkpoint != 5 {
		t.Fatalf("second acquisition = %+v; want node-b at epoch 2 with checkpoint 5", second)
	}
	wantErr(t, "SaveProgress under a superseded epoch", save(1, 9, 9), sluicetype.ErrFenced)
	wantProgress(t, st, 3, 5, map[string]int64{sub: 7})
	if err := save(2, 4, 8); err != nil {
		t.Fatalf("SaveProgress under the new epoch: %v", err)
	}
	wantProgress(t, st, 3, 5, map[string]int64{sub: 8}) // the checkpoint stays at 5
	wantErr(t, "SaveProgress on a partition never owned", saveProgress(st, store.ProgressParams{Partition: 4, Epoch: 1}), sluicetype.ErrFenced)
	wantErr(t, "SaveProgress under epoch 0", saveProgress(st, store.ProgressParams{Partition: 4}), sluicetype.ErrInvalidArgument)
}

// Parks and faults under a lease apply only while its epoch holds:
// once another node acquired the partition they write nothing and fail
// with ErrFenced. Without a fence (an operator's replay) they apply.
func testFencedWrites(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	sub := newStreamSub(t, st, "ns", "k", 2, 0)
	old := acquire(t, st, "node-a", 2)
	ev := func(pos int64) store.ParkedEvent {
		return store.ParkedEvent{Partition: 2, Record: sluicetype.Record{Position: pos, Namespace: "ns", Key: "k",
			Payload: []byte("x"), AppendedAt: time.Now()}, Error: "boom", Attempts: 1}
	}
	fenceOf := func(l store.PartitionLease) *store.Fence { return &store.Fence{Partition: l.Partition, Epoch: l.Epoch} }
	if err := st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(1)}, Fence: fenceOf(old)}); err != nil {
		t.Fatalf("Park under the owner's epoch: %v", err)
	}
	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: sub, Reason: "first", Fence: fenceOf(old)}); err != nil {
		t.Fatalf("FaultSubscription under the owner's epoch: %v", err)
	}
	cur := acquire(t, st, "node-b", 2)
	wantErr(t, "Park under a superseded epoch",
		st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(2)}, Fence: fenceOf(old)}), sluicetype.ErrFenced)
	wantErr(t, "FaultSubscription under a superseded epoch",
		st.FaultSubscription(ctx, &store.FaultParams{ID: sub, Reason: "stale", Fence: fenceOf(old)}), sluicetype.ErrFenced)
	if got, _ := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10}); len(got) != 1 || got[0].Position != 1 {
		t.Fatalf("parked after a fenced park: %+v, want position 1 alone", got)
	}
	if subs, _ := st.Subscriptions(ctx, &store.SubscriptionFilter{ID: sub}); subs[0].Fault != "first" {
		t.Fatalf("fault after a fenced fault: %q, want %q", subs[0].Fault, "first")
	}
	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: sub, Reason: "", Fence: fenceOf(cur)}); err != nil {
		t.Fatalf("FaultSubscription under the new owner's epoch: %v", err)
	}
	if err := st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(3)}}); err != nil {
		t.Fatalf("Park without a fence: %v", err)
	}
	wantErr(t, "Park on a partition never leased",
		st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{{Partition: 5, Record: ev(4).Record}},
			Fence: &store.Fence{Partition: 5, Epoch: 1}}), sluicetype.ErrFenced)
	wantErr(t, "Park of another partition's event under a lease",
		st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(4)}, Fence: &store.Fence{Partition: 1, Epoch: 1}}),
		sluicetype.ErrInvalidArgument)
	wantErr(t, "FaultSubscription under epoch 0",
		st.FaultSubscription(ctx, &store.FaultParams{ID: sub, Reason: "x", Fence: &store.Fence{Partition: 2}}), sluicetype.ErrInvalidArgument)
	if got, _ := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10}); len(got) != 2 {
		t.Fatalf("parked after the refused calls: %+v, want positions 1 and 3", got)
	}
}

// saveProgress saves one partition's progress and returns its error,
// the call's or the partition's.
func saveProgress(st store.Store, p store.ProgressParams) error {
	res, err := st.SaveProgress(context.Background(), []store.ProgressParams{p})
	if err != nil {
		return err
	}
	return res[0].Err
}

func wantProgress(t *testing.T, st store.Store, partition int32, checkpoint int64, positions map[string]int64) {
	t.Helper()
	pp, err := st.Progress(t.Context(), partition)
	if err != nil {
		t.Fatalf("Progress(%d): %v", partition, err)
	}
	if pp.Checkpoint != checkpoint || !reflect.DeepEqual(pp.Positions, positions) {
		t.Fatalf("Progress(%d) = checkpoint %d, positions %v; want %d, %v", partition, pp.Checkpoint, pp.Positions, checkpoint, positions)
	}
}

// newStreamSub creates a subscription to one stream (or, with an empty
// key, to its namespace on partitions 0 to 3) starting at start, and
// returns its id.
func newStreamSub(t *testing.T, st store.Store, ns, key string, partition int32, start int64) string {
	t.Helper()
	p := store.NewSubscription{ID: "s" + randHex(6), Consumer: "c", Namespace: ns, Key: key, Partition: partition,
		Start: map[int32]int64{partition: start}}
	if key == "" {
		p.Partition, p.Start = store.NoPartition, map[int32]int64{0: start, 1: start, 2: start, 3: start}
	}
	if err := st.CreateSubscription(t.Context(), &p); err != nil {
		t.Fatalf("CreateSubscription(%+v): %v", p, err)
	}
	return p.ID
}

// testListSubscriptions checks the listing of a stream's subscriptions
// by consumer: one stream's (not its namespace's, not another key's,
// though it differ only by a trailing space) or the namespace's, the
// consumers named (case-insensitively) or starting with a prefix, in
// (consumer in lower case, id) order, paged after the last one listed.
func testListSubscriptions(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	create := func(id, consumer, ns, key string) {
		t.Helper()
		p := store.NewSubscription{ID: id, Consumer: consumer, Namespace: ns, Key: key, Partition: 1, Start: map[int32]int64{1: 0}}
		if key == "" {
			p.Partition, p.Start = store.NoPartition, map[int32]int64{0: 0, 1: 0}
		}
		if err := st.CreateSubscription(ctx, &p); err != nil {
			t.Fatalf("CreateSubscription(%+v): %v", p, err)
		}
	}
	// In the order listed: by consumer in lower case, then id.
	stream := [][2]string{{"s-03", "a"}, {"s-09", "a"}, {"s-01", "B"}, {"s-07", "b"}, {"s-02", "b-2"}, {"s-05", "c"}, {"s-04", "c.d"}}
	for _, s := range stream {
		create(s[1]+"-"+s[0], s[1], "orders", "o-1")
	}
	create("ns/orders/a", "a", "orders", "")
	create("ns/orders/b", "b", "orders", "")
	create("o2-a", "a", "orders", "o-2")
	create("spaced-a", "a", "orders", "o-1 ")
	create("users-a", "a", "users", "o-1")
	list := func(p store.ListSubscriptionsParams) []string {
		t.Helper()
		if p.Max == 0 {
			p.Max = 100
		}
		subs, err := st.ListSubscriptions(ctx, &p)
		if err != nil {
			t.Fatalf("ListSubscriptions(%+v): %v", p, err)
		}
		var out []string
		for _, s := range subs {
			if s.Namespace != p.Namespace || s.Key != p.Key {
				t.Fatalf("ListSubscriptions(%+v) listed %+v", p, s)
			}
			out = append(out, s.ID)
		}
		return out
	}
	ids := func(which ...int) []string {
		var out []string
		for _, i := range which {
			out = append(out, stream[i][1]+"-"+stream[i][0])
		}
		return out
	}
	for _, c := range []struct {
		p    store.ListSubscriptionsParams
		want []string
	}{
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true}, ids(0, 1, 2, 3, 4, 5, 6)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "b"}, ids(2, 3)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "B"}, ids(2, 3)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "b", Prefix: true}, ids(2, 3, 4)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "C", Prefix: true}, ids(5, 6)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "c"}, ids(5)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "d", Prefix: true}, nil},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, AfterConsumer: "B", AfterID: "B-s-01"}, ids(3, 4, 5, 6)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "b", AfterConsumer: "a", AfterID: "zzz"}, ids(2, 3)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Consumer: "b", AfterConsumer: "b", AfterID: "zzz"}, nil},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, Max: 3}, ids(0, 1, 2)},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "", Prefix: true}, []string{"ns/orders/a", "ns/orders/b"}},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-2", Prefix: true}, []string{"o2-a"}},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1 ", Prefix: true}, []string{"spaced-a"}},
		{store.ListSubscriptionsParams{Namespace: "users", Key: "o-1", Prefix: true}, []string{"users-a"}},
		{store.ListSubscriptionsParams{Namespace: "nobody", Key: "o-1", Prefix: true}, nil},
	} {
		if got := list(c.p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ListSubscriptions(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	// Pages of 2, each after the last one listed, list them all once.
	var paged []string
	p := store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, Max: 2}
	for {
		subs, err := st.ListSubscriptions(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			paged = append(paged, s.ID)
		}
		if len(subs) < p.Max {
			break
		}
		p.AfterConsumer, p.AfterID = subs[len(subs)-1].Consumer, subs[len(subs)-1].ID
	}
	if want := ids(0, 1, 2, 3, 4, 5, 6); !reflect.DeepEqual(paged, want) {
		t.Errorf("paged by 2: %v, want %v", paged, want)
	}
	for _, bad := range []struct {
		p      store.ListSubscriptionsParams
		target error
	}{
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, Max: store.DefaultMaxBatch + 1}, sluicetype.ErrInvalidArgument},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, Max: -1}, sluicetype.ErrInvalidArgument},
		{store.ListSubscriptionsParams{Namespace: "bad name!", Key: "o-1", Prefix: true, Max: 1}, sluicetype.ErrInvalidName},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Max: 1}, sluicetype.ErrInvalidName},
		{store.ListSubscriptionsParams{Namespace: "orders", Key: "o-1", Prefix: true, AfterID: strings.Repeat("i", 300), Max: 1},
			sluicetype.ErrInvalidArgument},
	} {
		_, err := st.ListSubscriptions(ctx, &bad.p)
		wantErr(t, fmt.Sprintf("ListSubscriptions(%+v)", bad.p), err, bad.target)
	}
}

func testStreamSubscriptions(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	a := newStreamSub(t, st, "orders", "o-1", 2, 0)
	b := newStreamSub(t, st, "orders", "o-2", 5, 0)
	all := newStreamSub(t, st, "orders", "", 0, 0)
	other := newStreamSub(t, st, "users", "u-1", 2, 0)
	ids := func(f store.SubscriptionFilter) []string {
		t.Helper()
		subs, err := st.Subscriptions(ctx, &f)
		if err != nil {
			t.Fatalf("Subscriptions(%+v): %v", f, err)
		}
		var out []string
		for _, s := range subs {
			out = append(out, s.ID)
		}
		return out
	}
	sorted := func(s ...string) []string {
		out := append([]string(nil), s...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if out[j] < out[i] {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	}
	two := int32(2)
	for _, c := range []struct {
		f    store.SubscriptionFilter
		want []string
	}{
		{store.SubscriptionFilter{}, sorted(a, b, all, other)},
		{store.SubscriptionFilter{ID: b}, []string{b}},
		{store.SubscriptionFilter{Namespace: "orders", Key: "o-1"}, []string{a}},
		{store.SubscriptionFilter{Namespace: "orders"}, sorted(a, b, all)},
		{store.SubscriptionFilter{Partition: &two}, sorted(a, all, other)},
	} {
		if got := ids(c.f); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("Subscriptions(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	subs, err := st.Subscriptions(ctx, &store.SubscriptionFilter{ID: all})
	if err != nil || len(subs) != 1 {
		t.Fatalf("Subscriptions of one: %v, %v", subs, err)
	}
	if s := subs[0]; s.Consumer != "c" || s.Namespace != "orders" || s.Key != "" || s.Partition != store.NoPartition ||
		s.Fault != "" || time.Since(s.CreatedAt).Abs() > clockSkew {
		t.Fatalf("namespace subscription stored as %+v", s)
	}
	wantProgress(t, st, 1, 0, map[string]int64{all: 0})

	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: a, Reason: "handler failed 5 times"}); err != nil {
		t.Fatalf("FaultSubscription: %v", err)
	}
	subs, _ = st.Subscriptions(ctx, &store.SubscriptionFilter{ID: a})
	if subs[0].Fault != "handler failed 5 times" || time.Since(subs[0].FaultedAt).Abs() > clockSkew {
		t.Fatalf("faulted subscription stored as %+v", subs[0])
	}
	if err := st.FaultSubscription(ctx, &store.FaultParams{ID: a}); err != nil {
		t.Fatal(err)
	}
	subs, _ = st.Subscriptions(ctx, &store.SubscriptionFilter{ID: a})
	if subs[0].Fault != "" || !subs[0].FaultedAt.IsZero() {
		t.Fatalf("cleared fault stored as %+v", subs[0])
	}
	wantErr(t, "FaultSubscription of a missing one", st.FaultSubscription(ctx, &store.FaultParams{ID: "missing", Reason: "x"}), sluicetype.ErrSubscriptionNotFound)

	dup := store.NewSubscription{ID: a, Consumer: "c", Namespace: "orders", Key: "o-1", Partition: 2, Start: map[int32]int64{2: 0}}
	wantErr(t, "CreateSubscription with a taken id", st.CreateSubscription(ctx, &dup), sluicetype.ErrEntityExists)
	bad := store.NewSubscription{ID: "x", Consumer: "c", Namespace: "orders", Key: "o-1", Partition: 2, Start: map[int32]int64{3: 0}}
	wantErr(t, "CreateSubscription starting on another partition", st.CreateSubscription(ctx, &bad), sluicetype.ErrInvalidArgument)

	// Deleting takes the progress and parked events along, and a stale
	// owner's save does not bring the progress back.
	owner := acquire(t, st, "n", 2)
	if err := st.DeleteSubscription(ctx, a); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	wantErr(t, "DeleteSubscription twice", st.DeleteSubscription(ctx, a), sluicetype.ErrSubscriptionNotFound)
	if err := saveProgress(st, store.ProgressParams{Partition: 2, Epoch: owner.Epoch, Positions: map[string]int64{a: 9, other: 3}}); err != nil {
		t.Fatalf("SaveProgress naming a deleted subscription: %v", err)
	}
	wantProgress(t, st, 2, 0, map[string]int64{all: 0, other: 3})
	if got := ids(store.SubscriptionFilter{Namespace: "orders", Key: "o-1"}); got != nil {
		t.Fatalf("deleted subscription still listed: %v", got)
	}
}

// A subscription starting at an old position keeps retention from
// trimming what it has not read; one starting before what retention
// already trimmed is refused.
func testSubscriptionHoldsRetention(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	appendRecs(t, st, 1, recs("r", 10)...)
	o := acquire(t, st, "n", 1)
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: 10}); err != nil {
		t.Fatal(err)
	}
	late := newStreamSub(t, st, "ns", "key", 1, 4)
	wantProgress(t, st, 1, 4, map[string]int64{late: 4}) // the checkpoint came back with it
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: 10}); err != nil {
		t.Fatal(err)
	}
	wantProgress(t, st, 1, 4, map[string]int64{late: 4}) // an owner unaware of it cannot pass it
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 1, Max: 100}); err != nil || n != 4 {
		t.Fatalf("TrimConsumed with a subscription at 4 = %d, %v; want 4 records trimmed", n, err)
	}
	wantInfo(t, st, 1, store.PartitionInfo{Head: 10, Trimmed: 4})
	if got := positions(read(t, st, 1, 4, 100)); len(got) != 6 || got[0] != 5 {
		t.Fatalf("records after the subscription's start: %v, want 5..10", got)
	}
	tooOld := store.NewSubscription{ID: "s" + randHex(6), Consumer: "c", Namespace: "ns", Key: "key", Partition: 1, Start: map[int32]int64{1: 3}}
	wantErr(t, "CreateSubscription before the trimmed position", st.CreateSubscription(ctx, &tooOld), sluicetype.ErrTrimmed)
	if subs, _ := st.Subscriptions(ctx, &store.SubscriptionFilter{ID: tooOld.ID}); len(subs) != 0 {
		t.Fatalf("a refused subscription was stored: %+v", subs)
	}
	if err := saveProgress(st, store.ProgressParams{Partition: 1, Epoch: o.Epoch, Checkpoint: 10, Positions: map[string]int64{late: 10}}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 1, Max: 100}); err != nil || n != 6 {
		t.Fatalf("TrimConsumed once the subscription caught up = %d, %v; want 6", n, err)
	}

	// Racing: subscriptions created from position 0 while trims run never
	// find their records trimmed after their creation succeeded.
	appendRecs(t, st, 2, recs("r", 50)...)
	o2 := acquire(t, st, "n", 2)
	if err := saveProgress(st, store.ProgressParams{Partition: 2, Epoch: o2.Epoch, Checkpoint: 50}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	created := make(chan int64, 8)
	for i := range 8 {
		wg.Go(func() {
			start := int64(i * 5)
			p := store.NewSubscription{ID: "s" + randHex(6), Consumer: "c", Namespace: "ns", Key: "key", Partition: 2, Start: map[int32]int64{2: start}}
			err := st.CreateSubscription(ctx, &p)
			switch {
			case err == nil:
				created <- start
			case !errors.Is(err, sluicetype.ErrTrimmed):
				t.Errorf("CreateSubscription: %v", err)
			}
		})
		wg.Go(func() {
			if _, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 2, Max: 3}); err != nil {
				t.Errorf("TrimConsumed: %v", err)
			}
		})
	}
	wg.Wait()
	close(created)
	lowest := int64(50)
	for s := range created {
		lowest = min(lowest, s)
	}
	for {
		n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 2, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if got := info(t, st, 2).Trimmed; got != lowest {
		t.Fatalf("trimmed through %d with a subscription starting at %d", got, lowest)
	}
}

func testParked(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	sub := newStreamSub(t, st, "ns", "key", 1, 0)
	at := time.UnixMilli(time.Now().UnixMilli())
	ev := func(part int32, pos int64, payload, why string) store.ParkedEvent {
		return store.ParkedEvent{Partition: part, Record: sluicetype.Record{Position: pos, Namespace: "ns", Key: "key",
			Properties: map[string]string{"n": payload}, Payload: []byte(payload), AppendedAt: at}, Error: why, Attempts: 3}
	}
	if err := st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(1, 7, "seven", "boom"), ev(0, 9, "nine", "bang")}}); err != nil {
		t.Fatalf("Park: %v", err)
	}
	if err := st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(1, 7, "seven", "boom again")}}); err != nil {
		t.Fatalf("Park again: %v", err)
	}
	got, err := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10})
	if err != nil || len(got) != 2 {
		t.Fatalf("Parked = %+v, %v", got, err)
	}
	if g := got[0]; g.Partition != 0 || g.Position != 9 || string(g.Payload) != "nine" || g.Properties["n"] != "nine" ||
		g.Error != "bang" || g.Attempts != 3 || !g.AppendedAt.Equal(at) || time.Since(g.ParkedAt).Abs() > clockSkew {
		t.Fatalf("first parked event = %+v", g)
	}
	if got[1].Position != 7 || got[1].Error != "boom again" {
		t.Fatalf("event parked again = %+v, want the newer error", got[1])
	}
	page, err := st.Parked(ctx, &store.ParkedParams{Subscription: sub, AfterPartition: 0, AfterPosition: 9, Max: 10})
	if err != nil || len(page) != 1 || page[0].Position != 7 {
		t.Fatalf("Parked after (0, 9) = %+v, %v", page, err)
	}
	err = st.Unpark(ctx, &store.UnparkParams{Subscription: sub, Events: []store.ParkedID{{Partition: 1, Position: 7}, {Partition: 1, Position: 8}}})
	wantErr(t, "Unpark naming an event not parked", err, sluicetype.ErrMessageNotFound)
	if err := st.Unpark(ctx, &store.UnparkParams{Subscription: sub, Events: []store.ParkedID{{Partition: 1, Position: 7}}}); err != nil {
		t.Fatalf("Unpark: %v", err)
	}
	if got, _ := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10}); len(got) != 1 || got[0].Position != 9 {
		t.Fatalf("Parked after Unpark = %+v", got)
	}
	if err := st.DeleteSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10}); len(got) != 0 {
		t.Fatalf("parked events outlived their subscription: %+v", got)
	}
	err = st.Park(ctx, &store.ParkParams{Subscription: sub, Events: []store.ParkedEvent{ev(1, 8, "late", "after the end")}})
	wantErr(t, "Park for a deleted subscription", err, sluicetype.ErrSubscriptionNotFound)
	if got, _ := st.Parked(ctx, &store.ParkedParams{Subscription: sub, Max: 10}); len(got) != 0 {
		t.Fatalf("an event was parked for a deleted subscription: %+v", got)
	}
}

// Without retention settings, trimming stops at the lowest of the
// checkpoint and every stored subscription position.
func testTrimConsumed(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 10}); err != nil || n != 0 {
		t.Fatalf("TrimConsumed of an empty partition = %d, %v", n, err)
	}
	appendRecs(t, st, 0, recs("r", 20)...)
	sub := newStreamSub(t, st, "ns", "key", 0, 0)
	o := acquire(t, st, "n", 0)
	save := func(checkpoint, pos int64) {
		t.Helper()
		if err := saveProgress(st, store.ProgressParams{Partition: 0, Epoch: o.Epoch, Checkpoint: checkpoint, Positions: map[string]int64{sub: pos}}); err != nil {
			t.Fatal(err)
		}
	}
	trim := func(max int, want int64, trimmed int64) {
		t.Helper()
		n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: max})
		if err != nil || n != want {
			t.Fatalf("TrimConsumed(max %d) = %d, %v; want %d", max, n, err, want)
		}
		wantInfo(t, st, 0, store.PartitionInfo{Head: 20, Trimmed: trimmed})
	}
	save(5, 12)
	trim(100, 5, 5)
	save(15, 12)
	trim(100, 7, 12)
	save(20, 20)
	trim(3, 3, 15)
	trim(100, 5, 20)
	trim(100, 0, 20)
}

func testRetentionByAge(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	if err := st.SetRetention(ctx, "kept", store.Retention{MaxAge: time.Hour}); err != nil {
		t.Fatalf("SetRetention: %v", err)
	}
	wantErr(t, "SetRetention negative", st.SetRetention(ctx, "kept", store.Retention{MaxAge: -time.Second}), sluicetype.ErrInvalidArgument)
	// 3 records of another namespace, then one kept for an hour, then more.
	var rs []store.NewRecord
	for i := range 6 {
		ns := "other"
		if i == 3 {
			ns = "kept"
		}
		rs = append(rs, store.NewRecord{Namespace: ns, Key: "k", Payload: []byte("x")})
	}
	appendRecs(t, st, 0, rs...)
	o := acquire(t, st, "n", 0)
	if err := saveProgress(st, store.ProgressParams{Partition: 0, Epoch: o.Epoch, Checkpoint: 6}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 100}); err != nil || n != 3 {
		t.Fatalf("TrimConsumed before a kept record = %d, %v; want 3", n, err)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 6, Trimmed: 3})
	if err := st.SetRetention(ctx, "kept", store.Retention{}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 100}); err != nil || n != 3 {
		t.Fatalf("TrimConsumed once the retention is cleared = %d, %v; want 3", n, err)
	}
}

func testRetentionBySize(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	if err := st.SetRetention(ctx, "sized", store.Retention{MaxBytes: 25}); err != nil {
		t.Fatal(err)
	}
	// Ten records of 10 bytes: the newest 2 fit in 25 bytes (a third would
	// not), so 8 may go.
	var rs []store.NewRecord
	for range 10 {
		rs = append(rs, store.NewRecord{Namespace: "sized", Key: "k", Payload: []byte("0123456789")})
	}
	appendRecs(t, st, 0, rs...)
	o := acquire(t, st, "n", 0)
	if err := saveProgress(st, store.ProgressParams{Partition: 0, Epoch: o.Epoch, Checkpoint: 10}); err != nil {
		t.Fatal(err)
	}
	if n, err := trimNow(ctx, st, &store.TrimConsumedParams{Partition: 0, Max: 100}); err != nil || n != 8 {
		t.Fatalf("TrimConsumed keeping 25 bytes of 10-byte records = %d, %v; want 8", n, err)
	}
	wantInfo(t, st, 0, store.PartitionInfo{Head: 10, Trimmed: 8})
}

// One SaveProgress stores several partitions, skipping a fenced one, and
// trims what the new checkpoints passed.
func testSaveProgressBatch(t *testing.T, h *harness) {
	ctx, st := h.setup(t)
	sub := newStreamSub(t, st, "ns", "", 0, 0) // partitions 0 to 3
	appendRecs(t, st, 0, recs("r", 10)...)
	appendRecs(t, st, 1, recs("r", 10)...)
	var epochs [3]int64
	for p := range int32(3) {
		epochs[p] = acquire(t, st, "a", p).Epoch
	}
	acquire(t, st, "b", 2)
	res, err := st.SaveProgress(ctx, []store.ProgressParams{
		{Partition: 2, Epoch: epochs[2], Checkpoint: 5, Positions: map[string]int64{sub: 5}},
		{Partition: 1, Epoch: epochs[1], Checkpoint: 7, Positions: map[string]int64{sub: 7}, Trim: 100},
		{Partition: 0, Epoch: epochs[0], Checkpoint: 10, Positions: map[string]int64{sub: 10}, Trim: 4},
	})
	if err != nil {
		t.Fatalf("SaveProgress: %v", err)
	}
	if !errors.Is(res[0].Err, sluicetype.ErrFenced) || res[1].Err != nil || res[1].Trimmed != 7 || res[2].Err != nil || res[2].Trimmed != 4 {
		t.Fatalf("SaveProgress results = %+v; want partition 2 fenced, 7 records of 1 and 4 of 0 trimmed", res)
	}
	wantProgress(t, st, 2, 0, map[string]int64{sub: 0})
	wantProgress(t, st, 1, 7, map[string]int64{sub: 7})
	wantProgress(t, st, 0, 10, map[string]int64{sub: 10})
	wantInfo(t, st, 0, store.PartitionInfo{Head: 10, Trimmed: 4})
	if res[1].Checkpoint != 7 || res[1].TrimmedThrough != 7 || res[2].Checkpoint != 10 || res[2].TrimmedThrough != 4 {
		t.Fatalf("SaveProgress results = %+v; want checkpoints 7 and 10 stored, trimmed through 7 and 4", res)
	}
	// The checkpoint stored is the proposal capped by the lowest stored
	// position (of a subscription on partition 3 that the owner does not
	// handle), and the watermark is reported when nothing was trimmed.
	appendRecs(t, st, 3, recs("r", 10)...)
	e3 := acquire(t, st, "a", 3).Epoch
	res, err = st.SaveProgress(ctx, []store.ProgressParams{{Partition: 3, Epoch: e3, Checkpoint: 9, Trim: 100}})
	if err != nil || res[0].Err != nil || res[0].Checkpoint != 0 || res[0].TrimmedThrough != 0 || res[0].Trimmed != 0 {
		t.Fatalf("SaveProgress of 9 beside a subscription at 0 = %+v, %v; want checkpoint 0 stored, nothing trimmed", res, err)
	}
	res, err = st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: epochs[0], Checkpoint: 10, Trim: 100}})
	if err != nil || res[0].Checkpoint != 10 || res[0].TrimmedThrough != 10 || res[0].Trimmed != 6 {
		t.Fatalf("SaveProgress trimming the rest of partition 0 = %+v, %v", res, err)
	}
	res, err = st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: epochs[0], Checkpoint: 10, Trim: 100}})
	if err != nil || res[0].Checkpoint != 10 || res[0].TrimmedThrough != 10 || res[0].Trimmed != 0 {
		t.Fatalf("SaveProgress with nothing left to trim = %+v, %v; want the watermark 10", res, err)
	}
	_, err = st.SaveProgress(ctx, []store.ProgressParams{{Partition: 0, Epoch: 1}, {Partition: 0, Epoch: 1}})
	wantErr(t, "SaveProgress naming a partition twice", err, sluicetype.ErrInvalidArgument)
}
