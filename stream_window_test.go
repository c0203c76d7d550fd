package sluice_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// The measured scenarios of issue 16, through the public API: a lagging
// or replaying subscription on a partition no longer stalls the others
// of that partition. Handlers wait on gates the tests open; the tests
// wait on conditions, never for a time.

// windowCache is a small cache, so that a few hundred events fill it
// many times over.
const windowCache = 64

func windowOptions() *sluice.StreamProcessorOptions {
	return &sluice.StreamProcessorOptions{CacheRecords: windowCache, ReadBatch: 16}
}

// twoStreams returns two streams of namespace ns on one partition.
func twoStreams(c *sluice.Client, ns string) (a, b sluice.StreamID, partition int32) {
	a = sluice.StreamID{Namespace: ns, Key: "a"}
	partition = sluice.PartitionOf(a, c.StreamPartitions())
	for i := 0; ; i++ {
		b = sluice.StreamID{Namespace: ns, Key: fmt.Sprint("b", i)}
		if sluice.PartitionOf(b, c.StreamPartitions()) == partition {
			return a, b, partition
		}
	}
}

func subscribe(t *testing.T, c *sluice.Client, id sluice.StreamID, consumer string, from sluice.StartPosition) sluice.StreamSubscription {
	t.Helper()
	sub, err := c.Subscribe(t.Context(), id, consumer, from)
	if err != nil {
		t.Fatalf("Subscribe(%s, %s): %v", id, consumer, err)
	}
	return sub
}

// publishRounds publishes rounds of n events to a, then m to b, and
// returns the positions of each.
func publishRounds(t *testing.T, c *sluice.Client, rounds int, a sluice.StreamID, n int, b sluice.StreamID, m int) (pa, pb []int64) {
	t.Helper()
	bodies := func(k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprint(i)
		}
		return out
	}
	for range rounds {
		pa = append(pa, publish(t, c, a, bodies(n)...)...)
		if m > 0 {
			pb = append(pb, publish(t, c, b, bodies(m)...)...)
		}
	}
	return pa, pb
}

// gate lets a handler's first allow deliveries through, then holds the
// others until it opens; held is closed once one is held.
type gate struct {
	allow  int64
	n      atomic.Int64
	open   chan struct{}
	held   chan struct{}
	marked atomic.Bool
}

func newGate(allow int64) *gate {
	return &gate{allow: allow, open: make(chan struct{}), held: make(chan struct{})}
}

func (g *gate) then(h sluice.StreamHandler) sluice.StreamHandler {
	return func(ctx context.Context, ev *sluice.StreamEvent) error {
		if g.n.Add(1) > g.allow {
			if g.marked.CompareAndSwap(false, true) {
				close(g.held)
			}
			select {
			case <-g.open:
			case <-ctx.Done():
				g.n.Add(-1)
				return ctx.Err()
			}
		}
		return h(ctx, ev)
	}
}

func (g *gate) waitHeld(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(within):
		t.Fatalf("no delivery reached the gate within %v", within)
	}
}

// waitGot waits until a subscription received exactly want on a stream,
// in order.
func waitGot(t *testing.T, col *collector, sub, key string, want []int64, within time.Duration) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("subscription %s to receive %d events of %s in order", sub, len(want), key), func() (bool, string) {
		got := col.positions(sub, key)
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("subscription %s received %v..., want %v... in order, each once", sub, head(got), head(want))
		}
		return len(got) == len(want), fmt.Sprintf("%d of %d", len(got), len(want))
	})
}

func partitionStats(t *testing.T, p *sluice.StreamProcessor, partition int32) sluice.StreamPartitionStats {
	t.Helper()
	for _, ps := range p.Stats() {
		if ps.Partition == partition {
			return ps
		}
	}
	t.Fatalf("the processor does not pull partition %d", partition)
	return sluice.StreamPartitionStats{}
}

func windowsOf(ps sluice.StreamPartitionStats) string {
	return fmt.Sprintf("windows %+v, %d splits, %d merges, %d cached, checkpoint %d", ps.Windows, ps.Splits, ps.Merges, ps.CachedRecords, ps.StoredCheckpoint)
}

// waitMerged waits until a partition's cache is one window again, after
// a merge.
func waitMerged(t *testing.T, p *sluice.StreamProcessor, partition int32) {
	t.Helper()
	waitFor(t, time.Minute, "the windows to merge", func() (bool, string) {
		ps := partitionStats(t, p, partition)
		return len(ps.Windows) == 1 && ps.Merges >= 1, windowsOf(ps)
	})
}

// A subscription whose handler blocks pins an old record; the other
// subscription of its partition gets ten times the cache's capacity past
// it, in a window of its own, while the cache stays within its bound and
// the checkpoint stays before the blocked event. Once released, the
// blocked one gets every event in order and the windows merge.
func TestStreamBlockedSubscriberDoesNotStallOthers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		fastID, slowID, partition := twoStreams(c, "blocked")
		fastSub := subscribe(t, c, fastID, "fast", sluice.FromNow())
		slowSub := subscribe(t, c, slowID, "slow", sluice.FromNow())
		fast, slow := newCollector(), newCollector()
		g := newGate(0)
		p := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
			p.Handle("fast", fast.handle, nil)
			p.Handle("slow", g.then(slow.handle), nil)
		})
		fastPos, slowPos := publishRounds(t, c, windowCache, fastID, 10, slowID, 2)
		g.waitHeld(t, time.Minute)
		waitGot(t, fast, fastSub.ID, fastID.Key, fastPos, 2*time.Minute)
		ps := partitionStats(t, p, partition)
		if len(ps.Windows) < 2 || ps.Splits < 1 || ps.CachedRecords > windowCache || ps.StoredCheckpoint >= slowPos[0] || ps.ProposedCheckpoint >= slowPos[0] {
			t.Fatalf("with the slow subscription blocked at %d: %s; want 2 windows after a split, at most %d cached, the checkpoint before it",
				slowPos[0], windowsOf(ps), windowCache)
		}
		close(g.open)
		waitGot(t, slow, slowSub.ID, slowID.Key, slowPos, 2*time.Minute)
		waitMerged(t, p, partition)
	})
}

// A subscription whose handler is slow (here it handles one event for
// every ten the other handles) no longer throttles the other to its
// pace: the fast one gets all its events while the slow one has handled
// a tenth of that.
func TestStreamSlowSubscriberDoesNotThrottleOthers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		fastID, slowID, partition := twoStreams(c, "slowpace")
		fastSub := subscribe(t, c, fastID, "fast", sluice.FromNow())
		slowSub := subscribe(t, c, slowID, "slow", sluice.FromNow())
		fast, slow := newCollector(), newCollector()
		tokens := make(chan struct{}, 10_000)
		released := make(chan struct{})
		p := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
			p.Handle("fast", func(ctx context.Context, ev *sluice.StreamEvent) error {
				fast.handle(ctx, ev)
				if fast.n.Load()%10 == 0 {
					tokens <- struct{}{}
				}
				return nil
			}, nil)
			p.Handle("slow", func(ctx context.Context, ev *sluice.StreamEvent) error {
				select {
				case <-tokens:
				case <-released:
				case <-ctx.Done():
					return ctx.Err()
				}
				return slow.handle(ctx, ev)
			}, nil)
		})
		fastPos, slowPos := publishRounds(t, c, windowCache, fastID, 10, slowID, 2)
		waitGot(t, fast, fastSub.ID, fastID.Key, fastPos, 2*time.Minute)
		if n := slow.n.Load(); n > int64(len(fastPos)/10) {
			t.Fatalf("the slow subscription handled %d events, more than the %d tokens it had", n, len(fastPos)/10)
		}
		if ps := partitionStats(t, p, partition); ps.Splits < 1 {
			t.Fatalf("the fast subscription got everything without a split: %s", windowsOf(ps))
		}
		close(released)
		waitGot(t, slow, slowSub.ID, slowID.Key, slowPos, 2*time.Minute)
		waitMerged(t, p, partition)
	})
}

// A subscription that starts or resumes behind the cache, with 1,500
// events of history, gets a window of its own: the live subscription of
// its partition receives new events at once while the replay is held,
// and the replay then gets everything in order, from the beginning, from
// a position, after its fault is cleared, or after a reposition to the
// oldest event.
func TestStreamReplayDoesNotStallLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start makes the replaying subscription once the live one has
		// the history, and returns it with the positions it must get.
		start func(t *testing.T, c *sluice.Client, id sluice.StreamID, history []int64, r *replayer) (sluice.StreamSubscription, []int64)
		// before is made before the history is published (nil: none).
		before func(t *testing.T, c *sluice.Client, id sluice.StreamID, r *replayer)
	}{
		{name: "FromBeginning", start: func(t *testing.T, c *sluice.Client, id sluice.StreamID, history []int64, r *replayer) (sluice.StreamSubscription, []int64) {
			return subscribe(t, c, id, "replay", sluice.FromBeginning()), history
		}},
		{name: "FromPosition", start: func(t *testing.T, c *sluice.Client, id sluice.StreamID, history []int64, r *replayer) (sluice.StreamSubscription, []int64) {
			return subscribe(t, c, id, "replay", sluice.FromPosition(history[100])), history[100:]
		}},
		{name: "ClearFault", before: func(t *testing.T, c *sluice.Client, id sluice.StreamID, r *replayer) {
			r.failing.Store(true)
			r.sub = subscribe(t, c, id, "replay", sluice.FromNow())
		}, start: func(t *testing.T, c *sluice.Client, id sluice.StreamID, history []int64, r *replayer) (sluice.StreamSubscription, []int64) {
			waitFor(t, time.Minute, "the replaying subscription to fault", func() (bool, string) {
				sub, err := c.GetStreamSubscription(t.Context(), r.sub.ID)
				return err == nil && sub.Fault != "", fmt.Sprint(sub.Fault, err)
			})
			r.failing.Store(false)
			if err := c.ClearFault(t.Context(), r.sub.ID); err != nil {
				t.Fatal(err)
			}
			return r.sub, history
		}},
		{name: "Reposition", start: func(t *testing.T, c *sluice.Client, id sluice.StreamID, history []int64, r *replayer) (sluice.StreamSubscription, []int64) {
			sub := subscribe(t, c, id, "replay", sluice.FromNow())
			// Once the processor runs it at the head: an agent that lists
			// the subscription and reads its position on either side of
			// the reposition applies it twice, which redelivers (at least
			// once holds; this test counts exactly once).
			waitFor(t, time.Minute, "the processor to run the new subscription", func() (bool, string) {
				for _, ps := range r.proc.Stats() {
					for _, s := range ps.Subscriptions {
						if s.ID == sub.ID && s.Window >= 0 {
							return true, ""
						}
					}
				}
				return false, "not yet"
			})
			if _, err := c.RepositionStreamSubscription(t.Context(), sub.ID, sluice.FromBeginning(), nil); err != nil {
				t.Fatal(err)
			}
			return sub, history
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, c *sluice.Client) {
				ctx := t.Context()
				const ns = "replay"
				if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
					t.Fatal(err)
				}
				id := sluice.StreamID{Namespace: ns, Key: "k"}
				partition := sluice.PartitionOf(id, c.StreamPartitions())
				liveSub := subscribe(t, c, id, "live", sluice.FromNow())
				live := newCollector()
				r := &replayer{col: newCollector(), gate: newGate(10)}
				if tc.before != nil {
					tc.before(t, c, id, r)
				}
				p := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
					p.Handle("live", live.handle, nil)
					p.Handle("replay", r.handle, &sluice.ConsumerOptions{OnFailure: sluice.FaultOnFailure, MaxAttempts: 1})
				})
				r.proc = p
				history, _ := publishRounds(t, c, 15, id, 100, id, 0)
				waitGot(t, live, liveSub.ID, id.Key, history, 2*time.Minute)
				sub, want := tc.start(t, c, id, history, r)
				r.gate.waitHeld(t, time.Minute)
				more, _ := publishRounds(t, c, 2, id, 100, id, 0)
				waitGot(t, live, liveSub.ID, id.Key, append(slices.Clone(history), more...), 2*time.Minute)
				if got := r.col.positions(sub.ID, id.Key); len(got) > 10 {
					t.Fatalf("the held replay received %d events", len(got))
				}
				close(r.gate.open)
				waitGot(t, r.col, sub.ID, id.Key, append(slices.Clone(want), more...), 2*time.Minute)
				waitMerged(t, p, partition)
			})
		})
	}
}

// replayer is the replaying consumer's handler: it fails while failing
// is set, and otherwise goes through its gate.
type replayer struct {
	col     *collector
	gate    *gate
	failing atomic.Bool
	sub     sluice.StreamSubscription
	proc    *sluice.StreamProcessor
}

func (r *replayer) handle(ctx context.Context, ev *sluice.StreamEvent) error {
	if r.failing.Load() {
		return fmt.Errorf("failing on purpose")
	}
	return r.gate.then(r.col.handle)(ctx, ev)
}

// A processor restarted while a subscription lags (its handler blocked,
// its stored position far behind the other's) does not make the other
// read from the lagging position again: the up-to-date subscription gets
// new events at once, and the lagging one all of its own once released.
func TestStreamRestartWithLaggingSubscriber(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		fastID, slowID, partition := twoStreams(c, "restart")
		fastSub := subscribe(t, c, fastID, "fast", sluice.FromNow())
		slowSub := subscribe(t, c, slowID, "slow", sluice.FromNow())
		fast, slow := newCollector(), newCollector()
		first := newGate(0)
		p1 := c.NewStreamProcessor(windowOptions())
		p1.Handle("fast", fast.handle, nil)
		p1.Handle("slow", first.then(slow.handle), nil)
		if err := p1.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p1.Stop(context.Background()) })
		fastPos, slowPos := publishRounds(t, c, 20, fastID, 10, slowID, 2)
		waitGot(t, fast, fastSub.ID, fastID.Key, fastPos, 2*time.Minute)
		// Stop without waiting for the blocked delivery: it is cancelled,
		// and the final progress leaves the slow subscription before it.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := p1.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}

		fast2 := newCollector()
		second := newGate(0)
		p2 := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
			p.Handle("fast", fast2.handle, nil)
			p.Handle("slow", second.then(slow.handle), nil)
		})
		second.waitHeld(t, time.Minute)
		moreFast, moreSlow := publishRounds(t, c, 2*windowCache, fastID, 5, slowID, 1)
		// The fast subscription may get again what it had when the first
		// processor stopped (at least once), then everything new, in
		// order.
		waitFor(t, 2*time.Minute, "the fast subscription to get the new events", func() (bool, string) {
			got := fast2.positions(fastSub.ID, fastID.Key)
			if !slices.IsSorted(got) {
				t.Fatalf("after the restart the fast subscription received %v, out of order", got)
			}
			return len(got) >= len(moreFast) && slices.Equal(got[len(got)-len(moreFast):], moreFast), fmt.Sprintf("%d events", len(got))
		})
		if ps := partitionStats(t, p2, partition); len(ps.Windows) < 2 {
			t.Fatalf("after the restart: %s; want the lagging subscription in a window of its own", windowsOf(ps))
		}
		close(second.open)
		waitGot(t, slow, slowSub.ID, slowID.Key, append(slices.Clone(slowPos), moreSlow...), 2*time.Minute)
		waitMerged(t, p2, partition)
	})
}

// noPositionedReads is a backend that says it cannot read after any
// position cheaply.
type noPositionedReads struct{ store.Backend }

func (b noPositionedReads) Features() store.Features {
	f := b.Backend.Features()
	f.PositionedReads = false
	return f
}

// On a backend without positioned reads the cache keeps one window, as
// it always did: a blocked subscription that pins the full cache holds
// the other subscription of its partition back (nothing is lost), and
// both get everything once it is released.
func TestStreamSingleWindowFallback(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c, err := sluice.NewClient(noPositionedReads{shared.Backend(t, kind)}, &sluice.Options{Service: "t-" + randHex(6), Logger: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			fastID, slowID, partition := twoStreams(c, "fallback")
			fastSub := subscribe(t, c, fastID, "fast", sluice.FromNow())
			slowSub := subscribe(t, c, slowID, "slow", sluice.FromNow())
			fast, slow := newCollector(), newCollector()
			g := newGate(0)
			p := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
				p.Handle("fast", fast.handle, nil)
				p.Handle("slow", g.then(slow.handle), nil)
			})
			fastPos, slowPos := publishRounds(t, c, windowCache, fastID, 10, slowID, 2)
			g.waitHeld(t, time.Minute)
			// The stall: the one window is full from the blocked event on,
			// and the fast subscription has handled all of it.
			waitFor(t, 2*time.Minute, "the cache full and the fast subscription through it", func() (bool, string) {
				ps := partitionStats(t, p, partition)
				done := false
				for _, s := range ps.Subscriptions {
					if s.ID == fastSub.ID {
						done = s.Position == ps.Read
					}
				}
				return ps.CachedRecords == windowCache && done, windowsOf(ps)
			})
			ps := partitionStats(t, p, partition)
			got := fast.positions(fastSub.ID, fastID.Key)
			if len(ps.Windows) != 1 || ps.Splits != 0 || len(got) >= len(fastPos) || ps.Read >= slowPos[0]+windowCache {
				t.Fatalf("without positioned reads: %s, read through %d, fast got %d of %d", windowsOf(ps), ps.Read, len(got), len(fastPos))
			}
			close(g.open)
			waitGot(t, fast, fastSub.ID, fastID.Key, fastPos, 2*time.Minute)
			waitGot(t, slow, slowSub.ID, slowID.Key, slowPos, 2*time.Minute)
		})
	}
}

// CacheWindows takes 0 for its default and 1 to MaxCacheWindows; a
// negative or larger one, an unknown WindowLimit, or a negative
// LaggingRate fails Start with ErrInvalidArgument.
func TestStreamProcessorCacheWindowsEdges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		start := func(o sluice.StreamProcessorOptions) error {
			p := c.NewStreamProcessor(&o)
			if err := p.Handle("c-"+randHex(4), func(context.Context, *sluice.StreamEvent) error { return nil },
				&sluice.ConsumerOptions{Namespace: "ns"}); err != nil {
				t.Fatal(err)
			}
			err := p.Start(t.Context())
			if err == nil {
				p.Stop(t.Context())
			}
			return err
		}
		for _, bad := range []sluice.StreamProcessorOptions{
			{CacheWindows: -1}, {CacheWindows: sluice.MaxCacheWindows + 1}, {WindowLimit: sluice.WindowLimitFault + 1},
			{LaggingRate: -1}, {LaggingRate: math.MinInt},
		} {
			wantErr(t, fmt.Sprintf("Start with %+v", bad), start(bad), sluice.ErrInvalidArgument)
		}
		for _, good := range []sluice.StreamProcessorOptions{
			{CacheWindows: 1}, {CacheWindows: sluice.MaxCacheWindows, WindowLimit: sluice.WindowLimitFault},
			{LaggingRate: 1}, {LaggingRate: sluice.UnboundedLagging},
		} {
			if err := start(good); err != nil {
				t.Fatalf("Start with %+v: %v", good, err)
			}
		}
	})
}

// A subscription to one stream that rewinds reads that stream's records,
// not its partition's: with one record in ten of the partition its
// stream's, its window reads about a tenth of the history again, and it
// gets every event of its stream, in order.
func TestStreamRewindReadsOneStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const ns = "rewind"
		if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
		a, b, partition := twoStreams(c, ns)
		subscribe(t, c, b, "live", sluice.FromNow())
		live := newCollector()
		rewind := newCollector()
		p := startStreamProcessor(t, c, windowOptions(), func(p *sluice.StreamProcessor) {
			p.Handle("live", live.handle, nil)
			p.Handle("rewind", rewind.handle, nil)
		})
		const rounds = 40
		pa, pb := publishRounds(t, c, rounds, a, 1, b, 9)
		live.waitCount(t, int64(len(pb)), time.Minute)
		var before int64
		for _, ps := range p.Stats() {
			if ps.Partition == partition {
				before = ps.RehydratedRecords
			}
		}
		sub := subscribe(t, c, a, "rewind", sluice.FromBeginning())
		rewind.waitCount(t, int64(len(pa)), time.Minute)
		if got := rewind.positions(sub.ID, a.Key); !slices.Equal(got, pa) {
			t.Fatalf("the rewinding subscription got %v, want %v", got, pa)
		}
		var ps sluice.StreamPartitionStats
		for _, s := range p.Stats() {
			if s.Partition == partition {
				ps = s
			}
		}
		// Its stream's records, and at most a read's worth more (what
		// the head window held it did not need to read).
		if read := ps.RehydratedRecords - before; read > int64(len(pa)) || ps.DuplicateReads != 0 {
			t.Fatalf("the rewind read %d records again (%d duplicates) for the %d of its stream among %d", read, ps.DuplicateReads, len(pa), len(pa)+len(pb))
		}
	})
}

// While a live subscription delivers, a replaying one starts at most
// LaggingRate deliveries a second (and a bucket of one), beside an
// allowance of twice what its partition took in (see
// TestStreamLaggingCatchesUp); once nothing live has been delivered for
// a second, the replay goes as fast as its handler. At 1 event a second
// and a live event every 200 ms, the replay's 200 events would take
// half a minute: they arrive within the test's bound only through the
// second rule.
func TestStreamLaggingRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const ns, history = "lagrate", 200
		if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
		a, b, _ := twoStreams(c, ns)
		pa, _ := publishRounds(t, c, history, a, 1, b, 0)
		subscribe(t, c, b, "live", sluice.FromNow())
		live := newLiveClock()
		replay := newCollector()
		opts := windowOptions()
		opts.LaggingRate = 1
		p := startStreamProcessor(t, c, opts, func(p *sluice.StreamProcessor) {
			p.Handle("live", live.handle, nil)
			p.Handle("replay", replay.handle, nil)
		})
		stopPublishing := publishEvery(t, c, b, 200*time.Millisecond)
		defer stopPublishing()
		live.waitCount(t, 5, time.Minute)
		sub := subscribe(t, c, a, "replay", sluice.FromBeginning())
		// Each try observes the replay for an interval (a rate is
		// measured over a time) with live deliveries at most 500 ms apart
		// throughout (a stalled machine may leave a longer gap, which
		// lifts the bound): within it the replay starts at most one
		// delivery a second, one more from the bucket, one started before
		// the interval may end in it, and twice the partition's inflow of
		// the interval and the 250 ms before it (at most two live events
		// more).
		checked := false
		for try := 0; try < 5 && !checked; try++ {
			from, before, liveBefore := time.Now(), replay.n.Load(), live.n.Load()
			live.resetGap()
			time.Sleep(1500 * time.Millisecond)
			got, elapsed, inflow := replay.n.Load()-before, time.Since(from), live.n.Load()-liveBefore+2
			if gap := live.maxGap(); gap > 500*time.Millisecond {
				t.Logf("live deliveries %v apart: the interval is measured again", gap)
				continue
			}
			if limit := int64(elapsed.Seconds()) + 3 + 2*inflow; got > limit {
				t.Fatalf("the replay got %d events in %v beside %d live ones, want at most %d", got, elapsed, inflow-2, limit)
			}
			checked = true
		}
		if !checked {
			t.Fatal("no interval of live deliveries at most 500 ms apart in five tries")
		}
		var held int64
		for _, ps := range p.Stats() {
			held += ps.LaggingHeld
		}
		if held == 0 {
			t.Fatal("Stats count no delivery the lagging rate held back")
		}
		stopPublishing()
		replay.waitCount(t, history, time.Minute)
		if got := replay.positions(sub.ID, a.Key); !slices.Equal(got, pa) {
			t.Fatalf("the replay got %v, want %v", got, pa)
		}
	})
}

// A lagging subscription gains on the head whatever LaggingRate says:
// with the rate at 1 event a second and 50 live events a second to the
// stream it replays, the bound alone would leave it further behind every
// second; the allowance of twice its partition's inflow brings it to the
// head while the live events go on. A try counts only if live
// deliveries stayed under a second apart until then (a longer gap lifts
// the bound, and would bring it there anyway); each try is a
// subscription of its own, replaying the same history. Then every event
// reaches it once, in order.
func TestStreamLaggingCatchesUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const ns, history, tries = "lagcatch", 300, 3
		if err := c.SetStreamRetention(ctx, ns, sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
		_, b, _ := twoStreams(c, ns)
		want, _ := publishRounds(t, c, history/100, b, 100, b, 0)
		liveSub := subscribe(t, c, b, "live", sluice.FromNow()).ID
		live := newLiveClock()
		replays := make([]*collector, tries)
		opts := windowOptions()
		opts.LaggingRate = 1
		startStreamProcessor(t, c, opts, func(p *sluice.StreamProcessor) {
			p.Handle("live", live.handle, nil)
			for i := range replays {
				replays[i] = newCollector()
				p.Handle(fmt.Sprint("replay", i), replays[i].handle, nil)
			}
		})
		stopPublishing := publishEvery(t, c, b, 20*time.Millisecond)
		defer stopPublishing()
		live.waitCount(t, 5, time.Minute)
		last := func(col *collector, sub string) int64 {
			ps := col.positions(sub, b.Key)
			if len(ps) == 0 {
				return 0
			}
			return ps[len(ps)-1]
		}
		var caught *collector
		var caughtSub string
	tries:
		for i, replay := range replays {
			live.resetGap()
			sub := subscribe(t, c, b, fmt.Sprint("replay", i), sluice.FromBeginning())
			deadline := time.Now().Add(45 * time.Second)
			for time.Now().Before(deadline) {
				if gap := live.maxGap(); gap >= time.Second {
					t.Logf("try %d: live deliveries %v apart, which lifts the bound: trying again", i, gap)
					continue tries
				}
				// Caught up: within a few events of the live subscription,
				// which follows the head.
				if l := last(live.collector, liveSub); l > 0 && last(replay, sub.ID) >= l-5 {
					caught, caughtSub = replay, sub.ID
					break tries
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("try %d: the replay reached position %d of %d in 45 s beside live events 20 ms apart",
				i, last(replay, sub.ID), last(live.collector, liveSub))
		}
		if caught == nil {
			t.Fatalf("no try of %d with live deliveries under a second apart", tries)
		}
		want = append(want, stopPublishing()...)
		caught.waitCount(t, int64(len(want)), time.Minute)
		if got := caught.positions(caughtSub, b.Key); !slices.Equal(got, want) {
			t.Fatalf("the replay got %d events %v, want %d %v", len(got), got, len(want), want)
		}
	})
}

// publishEvery publishes an event to id every interval until the
// returned func is called, which waits for the publisher to end (never
// cancelling a publish, whose outcome would then be unknown) and returns
// the positions it published (again on later calls).
func publishEvery(t *testing.T, c *sluice.Client, id sluice.StreamID, interval time.Duration) (stop func() []int64) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	var published []int64
	go func() {
		defer close(done)
		for {
			pos, err := c.Publish(t.Context(), id, sluice.Event{Body: []byte("live")})
			if err != nil {
				t.Error(err)
				return
			}
			published = append(published, pos...)
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
		}
	}()
	var once sync.Once
	return func() []int64 {
		once.Do(func() { close(quit) })
		<-done
		return published
	}
}

// liveClock counts a subscription's deliveries and the longest time
// between two of them since resetGap.
type liveClock struct {
	*collector
	mu   sync.Mutex
	last time.Time
	gap  time.Duration
}

func newLiveClock() *liveClock {
	return &liveClock{collector: newCollector()}
}

func (l *liveClock) handle(ctx context.Context, ev *sluice.StreamEvent) error {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() {
		l.gap = max(l.gap, now.Sub(l.last))
	}
	l.last = now
	l.mu.Unlock()
	return l.collector.handle(ctx, ev)
}

// resetGap starts measuring the longest gap from now.
func (l *liveClock) resetGap() {
	l.mu.Lock()
	l.last, l.gap = time.Now(), 0
	l.mu.Unlock()
}

// maxGap is the longest gap since resetGap, up to now.
func (l *liveClock) maxGap() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.gap, time.Since(l.last))
}
