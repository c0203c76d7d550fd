package sluice_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// ClusterStatus shows, for each partition, what its owner's cache holds,
// as the owner stored it with its lease: a window on every partition the
// processor pulls, and the records of a stream whose first event is in
// delivery on its partition; nothing once the processor stopped and gave
// its leases back.
func TestClusterStatusCaches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "orders", Key: "o-1"}
		if _, err := c.Subscribe(ctx, id, "audit", sluice.FromBeginning()); err != nil {
			t.Fatal(err)
		}
		publish(t, c, id, "a", "b", "c", "d", "e")
		part := sluice.PartitionOf(id, c.StreamPartitions())
		hold := make(chan struct{})
		p := startStreamProcessor(t, c, &sluice.StreamProcessorOptions{HeartbeatInterval: 50 * time.Millisecond},
			func(p *sluice.StreamProcessor) {
				p.Handle("audit", func(ctx context.Context, _ *sluice.StreamEvent) error {
					select { // the first event stays in delivery, and its records in the cache
					case <-hold:
					case <-ctx.Done():
					}
					return ctx.Err()
				}, &sluice.ConsumerOptions{DeliveryTimeout: time.Minute})
			})
		release := sync.OnceFunc(func() { close(hold) })
		t.Cleanup(release) // before the processor stops

		problems := func(st sluice.ClusterStatus) []string {
			var out []string
			if len(st.Partitions) != int(c.StreamPartitions()) {
				out = append(out, fmt.Sprintf("%d partitions", len(st.Partitions)))
			}
			for _, ps := range st.Partitions {
				wantRecords := ps.CachedRecords == 0
				if ps.Partition == part {
					wantRecords = ps.CachedRecords >= 1 && ps.CachedRecords <= 5
				}
				if !ps.Held || ps.CacheWindows < 1 || !wantRecords || len(ps.Leases) != 1 ||
					ps.Leases[0].CacheWindows != ps.CacheWindows || ps.Leases[0].CachedRecords != ps.CachedRecords {
					out = append(out, fmt.Sprintf("partition %+v", ps))
				}
			}
			return out
		}
		var last []string
		for deadline := time.Now().Add(15 * time.Second); ; {
			st, err := c.ClusterStatus(ctx)
			if err != nil {
				t.Fatalf("ClusterStatus: %v", err)
			}
			if last = problems(st); len(last) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ClusterStatus after 15 s: %v", last)
			}
			time.Sleep(20 * time.Millisecond)
		}
		release()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Stop(sctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		st, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatalf("ClusterStatus: %v", err)
		}
		for _, ps := range st.Partitions {
			if ps.Held || ps.CacheWindows != 0 || ps.CachedRecords != 0 || ps.Leases[0].CacheWindows != 0 || ps.Leases[0].CachedRecords != 0 {
				t.Errorf("after Stop: partition %+v", ps)
			}
		}
	})
}
