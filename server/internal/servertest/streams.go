package servertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// StreamNodes time the server's stream nodes for tests.
var StreamNodes = sluice.StreamProcessorOptions{HeartbeatInterval: 200 * time.Millisecond, FailureTimeout: 3 * time.Second,
	ProgressInterval: 20 * time.Millisecond, RefreshInterval: 100 * time.Millisecond, IdlePollInterval: 100 * time.Millisecond}

// Events collects deliveries by subscription and stream key.
type Events struct {
	mu  sync.Mutex
	got map[string][]int64 // subscription|key -> positions
}

// NewEvents returns an empty collection.
func NewEvents() *Events { return &Events{got: make(map[string][]int64)} }

// Add records a delivery.
func (e *Events) Add(ev *sluice.StreamEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := ev.Subscription + "|" + ev.Key
	e.got[k] = append(e.got[k], ev.Position)
}

// Positions returns the positions delivered to a subscription for a
// stream key, in delivery order.
func (e *Events) Positions(sub, key string) []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got[sub+"|"+key])
}

// FirstSeen is positions in the order they first appear.
func FirstSeen(positions []int64) []int64 {
	seen := make(map[int64]bool)
	var out []int64
	for _, p := range positions {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// StartRemote starts a remote stream processor and stops it when the
// test ends.
func StartRemote(t *testing.T, c *client.Client, group string, register func(p *client.StreamProcessor)) *client.StreamProcessor {
	t.Helper()
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Group: group})
	register(p)
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("StreamProcessor.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	return p
}

// CacheNodes are stream nodes with a cache small enough that a few
// hundred events fill it many times over.
func CacheNodes() sluice.StreamProcessorOptions {
	o := StreamNodes
	o.CacheRecords, o.ReadBatch = 64, 16
	return o
}

// Lagging is a consumer the server runs whose cache split: one
// subscription holds its first event, the other got past it.
type Lagging struct {
	Partition  int32
	Fast, Slow sluice.StreamSubscription
	// SlowAt is the position of the event slow holds.
	SlowAt int64
}

// StartLagging runs consumer "reader" through e's server (started with
// CacheNodes) with two subscriptions on one partition: slow, whose
// handler holds its first event until the test ends, and fast, which
// then gets three times the cache's capacity of events. It waits until
// the server's node shows the partition's cache split in two windows.
func StartLagging(t *testing.T, e *Env) Lagging {
	t.Helper()
	ctx := t.Context()
	c := e.Remote(t, nil)
	fastID := sluice.StreamID{Namespace: "shop", Key: "fast"}
	part := sluice.PartitionOf(fastID, e.Lib.StreamPartitions())
	slowID := sluice.StreamID{Namespace: "shop"}
	for i := 0; ; i++ {
		slowID.Key = fmt.Sprint("slow", i)
		if sluice.PartitionOf(slowID, e.Lib.StreamPartitions()) == part {
			break
		}
	}
	l := Lagging{Partition: part}
	var err error
	if l.Fast, err = c.Subscribe(ctx, fastID, "reader", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}
	if l.Slow, err = c.Subscribe(ctx, slowID, "reader", sluice.FromNow()); err != nil {
		t.Fatal(err)
	}
	got := NewEvents()
	hold := make(chan struct{})
	StartRemote(t, c, "", func(p *client.StreamProcessor) {
		p.Handle("reader", func(ctx context.Context, ev *sluice.StreamEvent) error {
			if ev.Key == slowID.Key {
				select {
				case <-hold:
				case <-ctx.Done():
				}
				return ctx.Err()
			}
			got.Add(ev)
			return nil
		}, &sluice.ConsumerOptions{DeliveryTimeout: 10 * time.Minute})
	})
	t.Cleanup(func() { close(hold) }) // before the processor stops
	var fastAt []int64
	for i := range 24 {
		pos, err := e.Lib.Publish(ctx, fastID, slices.Repeat([]sluice.Event{{Body: []byte("f")}}, 10)...)
		if err != nil {
			t.Fatal(err)
		}
		fastAt = append(fastAt, pos...)
		pos, err = e.Lib.Publish(ctx, slowID, sluice.Event{Body: []byte("s")}, sluice.Event{Body: []byte("s")})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			l.SlowAt = pos[0]
		}
	}
	WaitFor(t, "fast to get its 240 events", 2*time.Minute, func() bool {
		return slices.Equal(FirstSeen(got.Positions(l.Fast.ID, fastID.Key)), fastAt)
	})
	WaitFor(t, "the server's node to show the split", 30*time.Second, func() bool {
		ps, ok := ConsumerPartition(t, c, part)
		return ok && len(ps.Windows) >= 2 && ps.Splits >= 1
	})
	return l
}

// ConsumerPartition returns reader's stats of a partition on the
// server's node, through the API.
func ConsumerPartition(t *testing.T, c *client.Client, part int32) (sluice.StreamPartitionStats, bool) {
	t.Helper()
	_, stats, err := c.ConsumerStats(t.Context(), "reader")
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range stats {
		if ps.Partition == part {
			return ps, true
		}
	}
	return sluice.StreamPartitionStats{}, false
}
