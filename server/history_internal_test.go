package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceprom"
)

// The sizes the worst-case memory of history.go (and
// docs/architecture.md) counts with.
func TestHistorySampleSizes(t *testing.T) {
	if n := unsafe.Sizeof(entitySample{}); n != 72 {
		t.Errorf("an entity's sample takes %d bytes; the stated worst case counts 72", n)
	}
	if n := unsafe.Sizeof(lagSample{}); n != 16 {
		t.Errorf("a lag sample takes %d bytes; the stated worst case counts 16", n)
	}
	for interval, want := range map[time.Duration]int{DefaultHistoryInterval: 360, 15 * time.Second: 240, 7 * time.Second: 360,
		minHistoryInterval: 360, maxHistoryInterval: 12, 11 * time.Second: 328} {
		if got := historySize(interval); got != want {
			t.Errorf("historySize(%v) = %d, want %d", interval, got, want)
		}
	}
}

// A ring keeps the last samples pushed, oldest first, and never holds
// more than its size, in capacity either.
func TestHistoryRing(t *testing.T) {
	for _, size := range []int{1, 7, 360} {
		var r ring[int]
		for i := range 3*size + 2 {
			r.push(i, size)
			if cap(r.buf) > size {
				t.Fatalf("size %d: capacity %d after %d pushes", size, cap(r.buf), i+1)
			}
			want := make([]int, 0, size)
			for v := max(0, i+1-size); v <= i; v++ {
				want = append(want, v)
			}
			if got := r.all(); !slices.Equal(got, want) {
				t.Fatalf("size %d after %d pushes: %v, want %v", size, i+1, got, want)
			}
			if r.last() != i {
				t.Fatalf("size %d: last %d, want %d", size, r.last(), i)
			}
		}
	}
}

// entitiesSnapshot lists n queues q0000... with their counts.
func entitiesSnapshot(n int) sluiceprom.Snapshot {
	snap := sluiceprom.Snapshot{EntitiesComplete: true}
	for i := range n {
		snap.Entities = append(snap.Entities, sluiceprom.EntityStats{Path: fmt.Sprintf("q%04d", i),
			Stats: sluice.QueueStats{Active: int64(i), DeadLettered: 1}})
	}
	return snap
}

func noRead(context.Context, time.Duration) sluiceprom.Snapshot { return sluiceprom.Snapshot{} }

// The entities sampled are bounded: past maxHistoryEntities, the others
// have no ring, and counting their messages keeps no more names than
// the bound; a deleted entity's ring goes, when a complete read misses
// it or when the server deletes it, not when a read fails.
func TestHistoryEntityBounds(t *testing.T) {
	h := newHistory(time.Second, noRead)
	now := time.Now()
	h.record(entitiesSnapshot(maxHistoryEntities+500), now)
	if len(h.entities) != maxHistoryEntities {
		t.Fatalf("%d rings for %d entities, want %d", len(h.entities), maxHistoryEntities+500, maxHistoryEntities)
	}
	if _, ok := h.entity("q1200"); ok {
		t.Error("an entity past the bound has a ring")
	}
	if s, ok := h.entity("Q0999"); !ok || len(s) != 1 || s[0].active != 999 || s[0].deadLettered != 1 {
		t.Errorf("q0999 (named in upper case): %+v, %v", s, ok)
	}

	// Counting: every entity with a ring counts, others up to the bound.
	for i := range 3 * maxHistoryEntities {
		h.count(fmt.Sprintf("new%05d", i), flowSent, 1)
	}
	h.count("q0000", flowSent, 10)
	h.count("Q0000", flowReceived, 5)
	h.count("q0000", flowSettled, 0) // nothing
	if len(h.counts) > 2*maxHistoryEntities {
		t.Fatalf("%d names counted between two samples, bound %d", len(h.counts), 2*maxHistoryEntities)
	}
	if c := h.counts["q0000"]; c == nil || *c != [3]int64{10, 5, 0} {
		t.Fatalf("q0000 counted %v", c)
	}
	now = now.Add(2 * time.Second)
	h.record(entitiesSnapshot(maxHistoryEntities), now)
	s, _ := h.entity("q0000")
	if len(s) != 2 || s[1].sent != 5 || s[1].received != 2.5 || s[1].settled != 0 || s[1].at != now.UnixNano() {
		t.Errorf("q0000's rates over 2 s after 10 sent and 5 received: %+v", s)
	}
	if len(h.counts) != 0 {
		t.Errorf("%d names counted after a sample", len(h.counts))
	}

	// An incomplete read keeps the rings it misses; a complete one drops
	// them.
	partial := entitiesSnapshot(10)
	partial.EntitiesComplete = false
	h.record(partial, now.Add(time.Second))
	if _, ok := h.entity("q0500"); !ok || len(h.entities) != maxHistoryEntities {
		t.Fatalf("after an incomplete read: %d rings, q0500's %v", len(h.entities), ok)
	}
	if s, _ := h.entity("q0500"); len(s) != 2 {
		t.Errorf("q0500, missed by the incomplete read, has %d samples, want 2", len(s))
	}
	h.record(entitiesSnapshot(10), now.Add(2*time.Second))
	if len(h.entities) != 10 {
		t.Fatalf("after a complete read of 10 entities: %d rings", len(h.entities))
	}

	// Deleting drops at once: an entity, or a topic's subscriptions.
	h.record(sluiceprom.Snapshot{EntitiesComplete: true, Entities: []sluiceprom.EntityStats{{Path: "q0000"},
		{Path: "t/Subscriptions/a", Topic: "t"}, {Path: "t/Subscriptions/b", Topic: "t"}, {Path: "tt/Subscriptions/a", Topic: "tt"}}},
		now.Add(3*time.Second))
	h.forget("Q0000", "")
	h.forget("T", sluice.SubscriptionPath("T", ""))
	var left []string
	for p := range h.entities {
		left = append(left, p)
	}
	if slices.Sort(left); !slices.Equal(left, []string{"tt/Subscriptions/a"}) {
		t.Errorf("after deleting q0000 and topic t: rings of %q", left)
	}
}

// lagStatus is a cluster status of n subscriptions, sub-0000 of consumer
// c0000 lagging most, each on two partitions, and one subscription
// deleted while it was read (no consumer).
func lagStatus(n int) sluice.ClusterStatus {
	cs := sluice.ClusterStatus{Partitions: []sluice.PartitionStatus{{Partition: 0}, {Partition: 1}},
		Nodes: []sluice.ClusterNode{{ID: "n1", Group: "g", Consumers: []string{"c0001"}, Alive: true}}}
	for i := range n {
		for p := range cs.Partitions {
			cs.Partitions[p].Subscriptions = append(cs.Partitions[p].Subscriptions, sluice.SubscriptionLag{ID: fmt.Sprintf("sub-%04d", i),
				Consumer: fmt.Sprintf("c%04d", i), Namespace: "ns", Lag: int64(n - i)})
		}
	}
	cs.Partitions[0].Subscriptions = append(cs.Partitions[0].Subscriptions, sluice.SubscriptionLag{ID: "gone", Lag: 1 << 40})
	return cs
}

// The lag series are bounded: the subscriptions and consumers lagging
// most keep theirs; one that falls out of them, or goes, loses it.
func TestHistoryLagBounds(t *testing.T) {
	h := newHistory(time.Second, noRead)
	now := time.Now()
	n := maxHistorySubscriptions + 200
	h.record(sluiceprom.Snapshot{ClusterRead: true, Cluster: lagStatus(n)}, now)
	if len(h.subscriptions) != maxHistorySubscriptions || len(h.consumers) != maxHistoryConsumers {
		t.Fatalf("%d subscriptions and %d consumers sampled, want %d and %d", len(h.subscriptions), len(h.consumers),
			maxHistorySubscriptions, maxHistoryConsumers)
	}
	if _, _, ok := h.subscription("gone"); ok {
		t.Error("a subscription deleted while the status was read has a series")
	}
	if _, _, ok := h.subscription(fmt.Sprintf("sub-%04d", maxHistorySubscriptions)); ok {
		t.Error("the subscription lagging least, past the bound, has a series")
	}
	sub, s, ok := h.subscription("sub-0000")
	if !ok || sub != (streamSubscription{"c0000", "ns", ""}) || len(s) != 1 || s[0].lag != 2*int64(n) {
		t.Errorf("sub-0000, lagging %d on each of 2 partitions: %+v %+v %v", n, sub, s, ok)
	}
	top := h.consumerLags("", 3)
	if len(top) != 3 || top[0].consumer != "c0000" || top[1].consumer != "c0001" || top[1].group != "g" || top[0].group != "" ||
		top[0].samples[0].lag != 2*int64(n) {
		t.Errorf("the 3 consumers lagging most: %+v", top)
	}
	if one := h.consumerLags("C0001", 10); len(one) != 1 || one[0].namespace != "ns" {
		t.Errorf("consumer c0001 (named in upper case): %+v", one)
	}

	// Ten subscriptions left, the first five now lagging least: all are
	// kept (within the bound), and the series go on.
	cs := lagStatus(10)
	h.record(sluiceprom.Snapshot{ClusterRead: true, Cluster: cs}, now.Add(time.Second))
	if len(h.subscriptions) != 10 || len(h.consumers) != 10 {
		t.Fatalf("after 10 remain: %d subscriptions, %d consumers", len(h.subscriptions), len(h.consumers))
	}
	if _, s, _ := h.subscription("sub-0009"); len(s) != 2 {
		t.Errorf("sub-0009 has %d samples, want 2", len(s))
	}
	// A failed read of the status keeps every series, without a sample.
	h.record(sluiceprom.Snapshot{}, now.Add(2*time.Second))
	if _, s, _ := h.subscription("sub-0009"); len(s) != 2 || len(h.consumers) != 10 {
		t.Errorf("after a failed read: sub-0009 has %d samples, %d consumers", len(s), len(h.consumers))
	}
	h.record(sluiceprom.Snapshot{ClusterRead: true, Cluster: lagStatus(0)}, now.Add(3*time.Second))
	if len(h.subscriptions) != 0 || len(h.consumers) != 0 {
		t.Errorf("with no subscriptions: %d and %d series", len(h.subscriptions), len(h.consumers))
	}
}

// A snapshot read while an entity was deleted still lists it: recording
// it does not bring the entity's ring back; a snapshot read more than an
// interval after the delete (the entity created again) does.
func TestHistoryDeleteDuringRead(t *testing.T) {
	h := newHistory(time.Second, noRead)
	listing := func(at time.Time) sluiceprom.Snapshot {
		return sluiceprom.Snapshot{At: at, EntitiesComplete: true, Entities: []sluiceprom.EntityStats{{Path: "orders"}}}
	}
	now := time.Now()
	h.record(listing(now), now)
	h.forget("Orders", "")
	later := time.Now()
	h.record(listing(later), later) // read before the delete, recorded after it
	if _, ok := h.entities["orders"]; ok {
		t.Fatal("a snapshot read as the queue was deleted brought its ring back")
	}
	again := later.Add(2 * time.Second)
	h.record(listing(again), again)
	if _, ok := h.entities["orders"]; !ok {
		t.Fatal("a queue listed two intervals after its delete (created again) has no ring")
	}
	if len(h.forgotten) != 0 {
		t.Fatalf("%d deletes still remembered after an interval", len(h.forgotten))
	}
}
