package sluice_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// tenantStore returns the store of the client's tenant, to look at what
// the library does not show (a partition's retention watermark).
func tenantStore(t *testing.T, kind, service string) store.Store {
	t.Helper()
	st, err := shared.Backend(t, kind).Store(store.Tenant{Service: service, Provider: sluice.DefaultProvider})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %s: %s", within, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Age retention acts on time: records a consumer is done with go once
// they are older than MaxAge, although nothing is published after them
// (the partition is quiet, its checkpoint no longer moves).
func TestStreamAgeRetentionOnQuietPartition(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		const maxAge = 2 * time.Second
		if err := c.SetStreamRetention(ctx, "quiet", sluice.StreamRetention{MaxAge: maxAge}); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "quiet"})
		})
		id := sluice.StreamID{Namespace: "quiet", Key: "k"}
		bodies := make([]string, 50)
		for i := range bodies {
			bodies[i] = "e"
		}
		published := time.Now()
		pos := publish(t, c, id, bodies...)
		col.waitCount(t, 50, 30*time.Second)
		st := tenantStore(t, kind, service)
		part := sluice.PartitionOf(id, c.StreamPartitions())
		info, err := st.PartitionInfo(ctx, part)
		if err != nil {
			t.Fatal(err)
		}
		if young := time.Since(published) < maxAge; young && info.Trimmed != 0 {
			t.Fatalf("records younger than %v were trimmed through %d", maxAge, info.Trimmed)
		}
		last := pos[len(pos)-1]
		waitFor(t, 30*time.Second, "the consumed records past their age are not trimmed", func() (bool, string) {
			info, err := st.PartitionInfo(ctx, part)
			if err != nil {
				t.Fatal(err)
			}
			return info.Trimmed == last, "trimmed through " + itoa(info.Trimmed) + ", want " + itoa(last)
		})
		if age := time.Since(published); age < maxAge {
			t.Fatalf("trimmed %v after publishing, before MaxAge %v", age, maxAge)
		}
	})
}

// A processor's stats show both checkpoints, each for what it is: the
// one its agent proposes (its consumers' lowest position) and the one
// stored, which a subscription no node handles holds back.
func TestStreamStatsCheckpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "cp", Key: "k"}
		// "idle" is handled by no processor: it holds the checkpoint at 0.
		if _, err := c.Subscribe(ctx, id, "idle", sluice.FromNow()); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		p := startStreamProcessor(t, c, &sluice.StreamProcessorOptions{ProgressInterval: 20 * time.Millisecond}, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "cp"})
		})
		pos := publish(t, c, id, "1", "2", "3", "4", "5")
		col.waitCount(t, 5, 30*time.Second)
		part := sluice.PartitionOf(id, c.StreamPartitions())
		last := pos[len(pos)-1]
		waitFor(t, 30*time.Second, "the stats do not show both checkpoints", func() (bool, string) {
			for _, ps := range p.Stats() {
				if ps.Partition == part {
					return ps.ProposedCheckpoint == last && ps.StoredCheckpoint == 0,
						"proposed " + itoa(ps.ProposedCheckpoint) + ", stored " + itoa(ps.StoredCheckpoint) + "; want " + itoa(last) + " and 0"
				}
			}
			return false, "the partition is not pulled"
		})
		cs, err := c.ClusterStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := cs.Partitions[part].Checkpoint; got != 0 {
			t.Fatalf("ClusterStatus shows checkpoint %d, want 0 (stored)", got)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// overlapCheck is a handler wrapper that counts deliveries of a stream
// that overlap another delivery of the same stream.
type overlapCheck struct {
	mu       sync.Mutex
	active   map[string]int
	overlaps int
}

func (o *overlapCheck) enter(key string) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active == nil {
		o.active = make(map[string]int)
	}
	o.active[key]++
	if o.active[key] > 1 {
		o.overlaps++
	}
	return func() {
		o.mu.Lock()
		o.active[key]--
		o.mu.Unlock()
	}
}

func (o *overlapCheck) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.overlaps
}

// A replay of parked events goes through the stream's ordered delivery:
// replayed while the same stream's live events are delivered, no
// delivery overlaps another of its stream, and the live events still
// come in order, each once.
func TestStreamReplayNeverOverlapsLiveDelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		var healed atomic.Bool
		var ov overlapCheck
		col := newCollector()
		handler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			defer ov.enter(ev.Key)()
			if string(ev.Body) == "bad" && !healed.Load() {
				return errors.New("bad")
			}
			time.Sleep(20 * time.Millisecond) // ignores ctx: a stream's deliveries must wait
			return col.handle(ctx, ev)
		}
		p := startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", handler, &sluice.ConsumerOptions{Namespace: "rp", MaxAttempts: 1})
		})
		id := sluice.StreamID{Namespace: "rp", Key: "k"}
		const sub = "ns/rp/c"
		bad := publish(t, c, id, "bad", "bad", "bad", "bad", "bad")
		waitFor(t, 30*time.Second, "the bad events are not parked", func() (bool, string) {
			evs, err := c.ParkedEvents(ctx, sub, 10)
			if err != nil {
				t.Fatal(err)
			}
			return len(evs) == len(bad), itoa(int64(len(evs))) + " parked"
		})
		healed.Store(true)
		bodies := make([]string, 60)
		for i := range bodies {
			bodies[i] = "live"
		}
		live := publish(t, c, id, bodies...)
		// Replay while the live events are being delivered.
		col.waitCount(t, 3, 30*time.Second)
		n, err := p.Replay(ctx, sub, 10)
		if err != nil || n != len(bad) {
			t.Fatalf("Replay = %d, %v; want %d", n, err, len(bad))
		}
		col.waitCount(t, int64(len(live)+len(bad)), 60*time.Second)
		if got := ov.count(); got > 0 {
			t.Fatalf("%d deliveries overlapped another of the same stream", got)
		}
		var gotLive []int64
		for _, pos := range col.positions(sub, "k") {
			if pos > bad[len(bad)-1] {
				gotLive = append(gotLive, pos)
			}
		}
		if !slices.Equal(gotLive, live) {
			t.Fatalf("the live events came as %v, want %v in order", head(gotLive), head(live))
		}
		if evs, err := c.ParkedEvents(ctx, sub, 10); err != nil || len(evs) != 0 {
			t.Fatalf("parked events after the replay: %+v, %v", evs, err)
		}
	})
}

// A namespace's expiry is a hard ceiling: a subscription that no node
// serves holds nothing older than it, so retention deletes what it had
// not read; once served, it meets the gap through its consumer's failure
// policy. Fault faults it with a reason that names ErrRetentionGap; Park
// parks a marker of the gap (which Replay leaves parked) and it reads on
// after the gap. Nothing is skipped silently.
func TestStreamRetentionExpiryGap(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		for _, policy := range []sluice.FailurePolicy{sluice.FaultOnFailure, sluice.ParkOnFailure} {
			t.Run(policy.String(), func(t *testing.T) { testRetentionGap(t, kind, service, c, policy) })
		}
	})
}

func testRetentionGap(t *testing.T, kind, service string, c *sluice.Client, policy sluice.FailurePolicy) {
	ctx := t.Context()
	ns := "gap-" + policy.String()
	id := sluice.StreamID{Namespace: ns, Key: "k"}
	if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{Expiry: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	late, err := c.Subscribe(ctx, id, "late-"+policy.String(), sluice.FromBeginning())
	if err != nil {
		t.Fatal(err)
	}
	pos := publish(t, c, id, "1", "2", "3", "4", "5")
	// A processor pulls the partition (for another consumer), and trims
	// what the late subscription had not read once it expired.
	busy := startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
		p.Handle("busy", func(context.Context, *sluice.StreamEvent) error { return nil }, &sluice.ConsumerOptions{Namespace: "gap-busy"})
	})
	st := tenantStore(t, kind, service)
	part := sluice.PartitionOf(id, c.StreamPartitions())
	last := pos[len(pos)-1]
	waitFor(t, 30*time.Second, "records past their expiry are not trimmed", func() (bool, string) {
		info, err := st.PartitionInfo(ctx, part)
		if err != nil {
			t.Fatal(err)
		}
		return info.Trimmed >= last, "trimmed through " + itoa(info.Trimmed) + ", want " + itoa(last)
	})
	// Later events stay until read.
	if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{Expiry: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := busy.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	p := startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
		p.Handle(late.Consumer, col.handle, &sluice.ConsumerOptions{OnFailure: policy})
	})
	if policy == sluice.FaultOnFailure {
		waitFor(t, 30*time.Second, "the late subscription is not faulted", func() (bool, string) {
			s, err := c.GetStreamSubscription(ctx, late.ID)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Contains(s.Fault, sluice.ErrRetentionGap.Error()), "fault " + strconv.Quote(s.Fault)
		})
		if n := col.n.Load(); n != 0 {
			t.Fatalf("the faulted subscription got %d events", n)
		}
		return
	}
	var marker sluice.ParkedEvent
	waitFor(t, 30*time.Second, "no marker of the gap is parked", func() (bool, string) {
		evs, err := c.ParkedEvents(ctx, late.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 {
			marker = evs[0]
		}
		return len(evs) == 1, "parked " + strconv.Itoa(len(evs))
	})
	want := itoa(pos[0]) + "-"
	if gap := marker.Properties[sluice.RetentionGapProperty]; !strings.HasPrefix(gap, want) || !strings.Contains(marker.Error, sluice.ErrRetentionGap.Error()) {
		t.Fatalf("parked marker %+v: want property %s %q... and an error naming the gap", marker, sluice.RetentionGapProperty, want)
	}
	after := publish(t, c, id, "6", "7")
	col.waitCount(t, 2, 30*time.Second)
	if got := col.positions(late.ID, "k"); !slices.Equal(got, after) {
		t.Fatalf("after the gap the subscription got %v, want %v", got, after)
	}
	if n, err := p.Replay(ctx, late.ID, 10); err != nil || n != 0 {
		t.Fatalf("Replay = %d, %v; want 0 (a marker is not delivered)", n, err)
	}
	if evs, err := c.ParkedEvents(ctx, late.ID, 10); err != nil || len(evs) != 1 {
		t.Fatalf("parked after Replay = %d, %v; want the marker left", len(evs), err)
	}
}
