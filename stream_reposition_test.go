package sluice_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// expireThrough deletes a partition's records through position through
// although subscriptions of namespace still need them, as a retention
// expiry does: with an expiry of a millisecond on the namespace,
// TrimConsumed deletes them, no further; then the namespace's retention is
// cleared, so that nothing else goes.
func expireThrough(t *testing.T, st store.Store, namespace string, partition int32, through int64) {
	t.Helper()
	ctx := t.Context()
	if err := st.SetRetention(ctx, namespace, store.Retention{Expiry: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records expired", func() (bool, string) {
		info, err := st.PartitionInfo(ctx, partition)
		if err != nil {
			t.Fatal(err)
		}
		if info.Trimmed >= through {
			return true, ""
		}
		if _, err := st.(store.Trimmer).TrimConsumed(ctx, &store.TrimConsumedParams{Partition: partition, Max: int(through - info.Trimmed)}); err != nil {
			t.Fatal(err)
		}
		return false, fmt.Sprintf("trimmed through %d", info.Trimmed)
	})
	if err := st.SetRetention(ctx, namespace, store.Retention{}); err != nil {
		t.Fatal(err)
	}
	if info, err := st.PartitionInfo(ctx, partition); err != nil || info.Trimmed != through {
		t.Fatalf("partition %d after the expiry: %+v, %v; want trimmed through %d", partition, info, err, through)
	}
}

// waitFault waits until a subscription is faulted (or, with want false,
// runs).
func waitFault(t *testing.T, c *sluice.Client, sub string, want bool) sluice.StreamSubscription {
	t.Helper()
	var s sluice.StreamSubscription
	waitFor(t, 30*time.Second, "subscription "+sub+" fault state", func() (bool, string) {
		var err error
		if s, err = c.GetStreamSubscription(t.Context(), sub); err != nil {
			t.Fatal(err)
		}
		return (s.Fault != "") == want, "fault " + s.Fault
	})
	return s
}

// A subscription that lost records to retention faults, and ClearFault
// alone faults it again: a reposition moves it past the gap, explicit
// and namespace subscriptions alike, recorded on the subscription, and
// refuses positions retention deleted.
func TestStreamRepositionPastRetentionGap(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "gap", Key: "k"}
		explicit, err := c.Subscribe(ctx, id, "c", sluice.FromNow())
		if err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		// A first run stores the namespace subscription of "n".
		first := startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("n", col.handle, &sluice.ConsumerOptions{Namespace: "gap"})
		})
		if err := first.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		const implicit = "ns/gap/n"
		pos := publish(t, c, id, "1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
		part := sluice.PartitionOf(id, c.StreamPartitions())
		// Records both still need go, as an expiry deletes them.
		expireThrough(t, tenantStore(t, kind, service), "gap", part, pos[4])
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{OnFailure: sluice.FaultOnFailure}) // a gap faults it
			p.Handle("n", col.handle, &sluice.ConsumerOptions{Namespace: "gap", OnFailure: sluice.FaultOnFailure})
		})
		for _, sub := range []string{explicit.ID, implicit} {
			waitFault(t, c, sub, true)
			if err := c.ClearFault(ctx, sub); err != nil {
				t.Fatal(err)
			}
			waitFault(t, c, sub, true) // the gap is still there
		}
		_, err = c.RepositionStreamSubscription(ctx, explicit.ID, sluice.FromPosition(pos[3]), nil)
		wantErr(t, "Reposition into the gap", err, sluice.ErrTrimmed)
		_, err = c.RepositionStreamSubscription(ctx, explicit.ID, sluice.FromPosition(0), nil)
		wantErr(t, "Reposition to position 0", err, sluice.ErrInvalidArgument)
		_, err = c.RepositionStreamSubscription(ctx, explicit.ID, sluice.FromPosition(pos[9]+2), nil)
		wantErr(t, "Reposition past the head", err, sluice.ErrInvalidArgument)
		_, err = c.RepositionStreamSubscription(ctx, "missing", sluice.FromBeginning(), nil)
		wantErr(t, "Reposition of a missing subscription", err, sluice.ErrSubscriptionNotFound)
		_, err = c.RepositionStreamSubscription(ctx, implicit, sluice.FromPosition(pos[5]), &sluice.RepositionOptions{Partition: 99})
		wantErr(t, "Reposition on partition 99", err, sluice.ErrInvalidArgument)

		r, err := c.RepositionStreamSubscription(ctx, explicit.ID, sluice.FromBeginning(), &sluice.RepositionOptions{By: "ops"})
		if err != nil || r.To != "oldest" || r.By != "ops" || r.FromPositions[part] != 0 || r.ToPositions[part] != pos[4] || r.At.IsZero() {
			t.Fatalf("Reposition to the oldest = %+v, %v", r, err)
		}
		r, err = c.RepositionStreamSubscription(ctx, implicit, sluice.FromPosition(pos[5]), &sluice.RepositionOptions{Partition: part, By: "ops"})
		if err != nil || r.To != "position" || len(r.ToPositions) != 1 || r.ToPositions[part] != pos[4] {
			t.Fatalf("Reposition of the namespace subscription = %+v, %v", r, err)
		}
		col.waitCount(t, 10, 30*time.Second)
		for _, sub := range []string{explicit.ID, implicit} {
			if got := col.positions(sub, "k"); !slices.Equal(got, pos[5:]) {
				t.Fatalf("%s received %v after the reposition, want %v", sub, got, pos[5:])
			}
			s := waitFault(t, c, sub, false)
			if s.Repositions != 1 || s.LastReposition == nil || s.LastReposition.By != "ops" || s.LastReposition.ToPositions[part] != pos[4] {
				t.Fatalf("%s after the reposition = %+v, last %+v", sub, s, s.LastReposition)
			}
		}
	})
}

// Against a running agent: a subscription repositioned to the head while
// it delivers picks the new position up, delivers nothing older once it
// delivered a newer event, and its stored position never goes back.
func TestStreamRepositionWhileDelivering(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "run", Key: "k"}
		var mu sync.Mutex
		var order []int64
		handler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			mu.Lock()
			order = append(order, ev.Position)
			mu.Unlock()
			select {
			case <-time.After(30 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}
		startStreamProcessor(t, c, &sluice.StreamProcessorOptions{ProgressInterval: 20 * time.Millisecond}, func(p *sluice.StreamProcessor) {
			p.Handle("n", handler, &sluice.ConsumerOptions{Namespace: "run"})
		})
		const sub = "ns/run/n"
		waitFor(t, 30*time.Second, "the namespace subscription is not stored", func() (bool, string) {
			_, err := c.GetStreamSubscription(ctx, sub)
			return err == nil, "not yet"
		})
		bodies := make([]string, 100)
		for i := range bodies {
			bodies[i] = "old"
		}
		old := publish(t, c, id, bodies...)
		waitFor(t, 30*time.Second, "nothing delivered", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(order) >= 3, "not yet"
		})
		r, err := c.RepositionStreamSubscription(ctx, sub, sluice.FromNow(), nil)
		part := sluice.PartitionOf(id, c.StreamPartitions())
		headAt := old[len(old)-1]
		if err != nil || r.ToPositions[part] != headAt {
			t.Fatalf("Reposition to the head = %+v, %v; want partition %d at %d", r, err, part, headAt)
		}
		fresh := publish(t, c, id, "new-1", "new-2", "new-3")
		deadline := time.Now().Add(30 * time.Second)
		for {
			cs, err := c.ClusterStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sl := range cs.Partitions[part].Subscriptions {
				if sl.ID == sub && sl.Position < headAt {
					t.Fatalf("the stored position went back to %d after the reposition to %d", sl.Position, headAt)
				}
			}
			mu.Lock()
			got := slices.Clone(order)
			mu.Unlock()
			if i := slices.Index(got, fresh[0]); i >= 0 {
				for _, p := range got[i:] {
					if p <= headAt {
						t.Fatalf("an old event (%d) was delivered after a new one: %v", p, got[i:])
					}
				}
				if n := len(got); got[n-1] == fresh[2] {
					if !slices.Equal(got[i:], fresh) {
						t.Fatalf("after the reposition: %v, want %v", got[i:], fresh)
					}
					if len(got) >= len(old)+len(fresh) {
						t.Fatalf("every old event was delivered (%d): the reposition did not move the subscription", len(got))
					}
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("deliveries after the reposition: %v", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// betweenReads is a backend whose stores run before, once, just ahead of
// the first read of partition part's progress: an agent reads that right
// after it listed the partition's subscriptions.
type betweenReads struct {
	store.Backend
	part   int32
	once   sync.Once
	before func(ctx context.Context, st store.Store)
}

func (b *betweenReads) Store(tn store.Tenant) (store.Store, error) {
	st, err := b.Backend.Store(tn)
	if err != nil {
		return nil, err
	}
	return &betweenReadsStore{Store: st, b: b}, nil
}

type betweenReadsStore struct {
	store.Store
	b *betweenReads
}

func (s *betweenReadsStore) Progress(ctx context.Context, partition int32) (store.PartitionProgress, error) {
	if partition == s.b.part {
		s.b.once.Do(func() { s.b.before(ctx, s.Store) })
	}
	return s.Store.Progress(ctx, partition)
}

// A reposition that commits after an agent listed a subscription and
// before it read the subscription's position applies once: the agent
// starts from the new position and delivers each event after it once,
// rather than taking the reposition for a new one at its next refresh
// and delivering them again.
func TestStreamRepositionBetweenAgentReads(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			service := "t-" + randHex(6)
			id := sluice.StreamID{Namespace: "race", Key: "k"}
			var (
				part int32
				pos  []int64
				sub  string
			)
			repositioned := make(chan error, 1)
			b := &betweenReads{Backend: shared.Backend(t, kind), part: -1,
				before: func(ctx context.Context, st store.Store) {
					_, err := st.RepositionSubscription(ctx, &store.RepositionParams{ID: sub, Kind: store.RepositionToPosition,
						Partition: part, Position: pos[2], By: "race"})
					repositioned <- err
				}}
			c, err := sluice.NewClient(b, &sluice.Options{Service: service, Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			part = sluice.PartitionOf(id, c.StreamPartitions())
			s, err := c.Subscribe(ctx, id, "c", sluice.FromBeginning())
			if err != nil {
				t.Fatal(err)
			}
			sub = s.ID
			pos = publish(t, c, id, "1", "2", "3", "4", "5")
			b.part = part // from now on: the agent's read, which comes next
			col := newCollector()
			startStreamProcessor(t, c, &sluice.StreamProcessorOptions{ProgressInterval: 20 * time.Millisecond}, func(p *sluice.StreamProcessor) {
				p.Handle("c", col.handle, nil)
			})
			if err := <-repositioned; err != nil {
				t.Fatalf("Reposition between the agent's reads: %v", err)
			}
			// The position is stored once every event after the new
			// position was delivered under the reposition's count; a
			// reposition applied twice stores it only once they were
			// delivered again.
			direct := tenantStore(t, kind, service)
			waitFor(t, 30*time.Second, "the subscription's position after its last event", func() (bool, string) {
				pp, err := direct.Progress(ctx, part)
				if err != nil {
					t.Fatal(err)
				}
				return pp.Positions[sub] == pos[4], fmt.Sprintf("at %d, delivered %v", pp.Positions[sub], col.positions(sub, "k"))
			})
			if got := col.positions(sub, "k"); !slices.Equal(got, pos[2:]) {
				t.Fatalf("delivered %v, want %v: each event after the reposition once", got, pos[2:])
			}
			if s, err := c.GetStreamSubscription(ctx, sub); err != nil || s.Repositions != 1 {
				t.Fatalf("subscription after the reposition = %+v, %v", s, err)
			}
		})
	}
}
