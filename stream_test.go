package sluice_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testdb"
	"github.com/sluicehq/sluice/store/storetest"
	"go.uber.org/goleak"
)

// collector records what handlers received, per subscription and stream.
type collector struct {
	mu   sync.Mutex
	got  map[string][]int64 // subscription + "|" + stream key -> positions
	n    atomic.Int64
	wait chan struct{}
}

func newCollector() *collector {
	return &collector{got: make(map[string][]int64), wait: make(chan struct{}, 1)}
}

func (c *collector) handle(ctx context.Context, ev *sluice.StreamEvent) error {
	c.mu.Lock()
	k := ev.Subscription + "|" + ev.Key
	c.got[k] = append(c.got[k], ev.Position)
	c.mu.Unlock()
	c.n.Add(1)
	select {
	case c.wait <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) positions(sub, key string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got[sub+"|"+key])
}

// waitCount waits until the collector holds at least n deliveries.
func (c *collector) waitCount(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for c.n.Load() < n {
		select {
		case <-c.wait:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d deliveries after %v, want %d", c.n.Load(), within, n)
		}
	}
}

// startProcessor starts a processor with fast polling, stopped when the
// test ends.
func startStreamProcessor(t *testing.T, c *sluice.Client, opts *sluice.StreamProcessorOptions, register func(p *sluice.StreamProcessor)) *sluice.StreamProcessor {
	t.Helper()
	if opts == nil {
		opts = &sluice.StreamProcessorOptions{}
	}
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = 200 * time.Millisecond
	}
	p := c.NewStreamProcessor(opts)
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

func publish(t *testing.T, c *sluice.Client, id sluice.StreamID, bodies ...string) []int64 {
	t.Helper()
	evs := make([]sluice.Event, len(bodies))
	for i, b := range bodies {
		evs[i] = sluice.Event{Body: []byte(b)}
	}
	pos, err := c.Publish(t.Context(), id, evs...)
	if err != nil {
		t.Fatalf("Publish(%s): %v", id, err)
	}
	return pos
}

// 1,000 streams of 100 events each reach a namespace subscription and an
// explicit one, each stream's events in order, every event once, handled
// 8 streams at a time per partition.
func TestStreamOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const streams, perStream, batch = 1000, 100, 25
		col := newCollector()
		var running, peak atomic.Int64
		handler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			return col.handle(ctx, ev)
		}
		explicitStream := sluice.StreamID{Namespace: "orders", Key: "k-7"}
		explicit, err := c.Subscribe(t.Context(), explicitStream, "audit", sluice.FromNow())
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			if err := p.Handle("billing", handler, &sluice.ConsumerOptions{Namespace: "orders", MaxConcurrency: 8}); err != nil {
				t.Fatal(err)
			}
			if err := p.Handle("audit", col.handle, nil); err != nil {
				t.Fatal(err)
			}
		})
		want := make(map[string][]int64, streams)
		var mu sync.Mutex
		var wg sync.WaitGroup
		jobs := make(chan int)
		for range 8 {
			wg.Go(func() {
				for j := range jobs {
					key := "k-" + strconv.Itoa(j%streams)
					bodies := make([]string, batch)
					for i := range bodies {
						bodies[i] = strconv.Itoa(j/streams*batch + i)
					}
					pos := publish(t, c, sluice.StreamID{Namespace: "orders", Key: key}, bodies...)
					mu.Lock()
					want[key] = append(want[key], pos...)
					mu.Unlock()
				}
			})
		}
		for j := range streams * perStream / batch {
			jobs <- j
		}
		close(jobs)
		wg.Wait()
		// An event of another namespace, in the same partitions, concerns
		// no one.
		publish(t, c, sluice.StreamID{Namespace: "users", Key: "k-7"}, "ignored")
		col.waitCount(t, streams*perStream+perStream, 3*time.Minute)
		implicit := "ns/orders/billing"
		for key, w := range want {
			slices.Sort(w) // one stream's positions, in publish order
			if got := col.positions(implicit, key); !slices.Equal(got, w) {
				t.Fatalf("stream %s: the namespace subscription received %d events %v..., want %d in order", key, len(got), head(got), len(w))
			}
		}
		if got, w := col.positions(explicit.ID, "k-7"), want["k-7"]; !slices.Equal(got, w) {
			t.Fatalf("the explicit subscription received %v, want %v", head(got), head(w))
		}
		if p := peak.Load(); p < 2 || p > 8*16 {
			t.Fatalf("at most %d deliveries ran at once, want parallel ones, within 8 per partition", p)
		}
		time.Sleep(300 * time.Millisecond)
		if n := col.n.Load(); n != streams*perStream+perStream {
			t.Fatalf("%d deliveries, want exactly %d", n, streams*perStream+perStream)
		}
	})
}

func head[T any](s []T) []T { return s[:min(len(s), 5)] }

// With one cache window, a stalled subscription pins the cache, which
// stops reading at its bound; nothing is lost or skipped for the other,
// and both get every event once the stalled one resumes.
func TestStreamSlowSubscription(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const events, cacheRecords = 600, 64
		fast := newCollector()
		slow := newCollector()
		release := make(chan struct{})
		var stalled atomic.Bool
		slowHandler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			if stalled.CompareAndSwap(false, true) {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return slow.handle(ctx, ev)
		}
		// One window: the cache as it was before it had windows (see
		// TestStreamBlockedSubscriberDoesNotStallOthers for several).
		p := startStreamProcessor(t, c, &sluice.StreamProcessorOptions{CacheRecords: cacheRecords, ReadBatch: 16, CacheWindows: 1}, func(p *sluice.StreamProcessor) {
			p.Handle("fast", fast.handle, &sluice.ConsumerOptions{Namespace: "metrics"})
			p.Handle("slow", slowHandler, &sluice.ConsumerOptions{Namespace: "metrics", MaxConcurrency: 1})
		})
		id := sluice.StreamID{Namespace: "metrics", Key: "cpu"}
		var pos []int64
		for i := range events / 50 {
			bodies := make([]string, 50)
			for j := range bodies {
				bodies[j] = fmt.Sprint(i*50 + j)
			}
			pos = append(pos, publish(t, c, id, bodies...)...)
		}
		// The fast subscription gets what the cache holds, then waits.
		time.Sleep(time.Second)
		got := fast.positions("ns/metrics/fast", "cpu")
		if len(got) >= events {
			t.Fatalf("the fast subscription got all %d events while the slow one pinned a cache of %d", len(got), cacheRecords)
		}
		if !slices.Equal(got, pos[:len(got)]) {
			t.Fatalf("the fast subscription got %v..., want a prefix of the stream", head(got))
		}
		for _, ps := range p.Stats() {
			if ps.CachedRecords > cacheRecords {
				t.Fatalf("partition %d caches %d records, bound %d", ps.Partition, ps.CachedRecords, cacheRecords)
			}
		}
		close(release)
		fast.waitCount(t, events, time.Minute)
		slow.waitCount(t, events, time.Minute)
		if got := fast.positions("ns/metrics/fast", "cpu"); !slices.Equal(got, pos) {
			t.Fatalf("fast received %d events, want all %d in order", len(got), len(pos))
		}
		if got := slow.positions("ns/metrics/slow", "cpu"); !slices.Equal(got, pos) {
			t.Fatalf("slow received %d events, want all %d in order", len(got), len(pos))
		}
	})
}

// Failed deliveries are retried, then parked (and replayed) or fault the
// subscription (until its fault is cleared); a panicking handler is one
// more failure.
func TestStreamFailurePolicies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		var healed atomic.Bool
		var attempts sync.Map
		flaky := func(col *collector) sluice.StreamHandler {
			return func(ctx context.Context, ev *sluice.StreamEvent) error {
				n, _ := attempts.LoadOrStore(ev.Subscription+string(ev.Body), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				if !healed.Load() {
					switch string(ev.Body) {
					case "bad":
						return errors.New("cannot handle bad")
					case "panic":
						panic("handler bug")
					}
				}
				return col.handle(ctx, ev)
			}
		}
		parked, faulted := newCollector(), newCollector()
		opts := func(policy sluice.FailurePolicy) *sluice.ConsumerOptions {
			return &sluice.ConsumerOptions{Namespace: "jobs", MaxAttempts: 3, RetryBackoff: time.Millisecond, OnFailure: policy}
		}
		p := startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("parker", flaky(parked), opts(sluice.ParkOnFailure))
			p.Handle("faulter", flaky(faulted), opts(sluice.FaultOnFailure))
		})
		id := sluice.StreamID{Namespace: "jobs", Key: "j"}
		pos := publish(t, c, id, "ok-1", "bad", "ok-2", "panic", "ok-3")
		parked.waitCount(t, 3, 30*time.Second)
		const parker, faulter = "ns/jobs/parker", "ns/jobs/faulter"
		if got := parked.positions(parker, "j"); !slices.Equal(got, []int64{pos[0], pos[2], pos[4]}) {
			t.Fatalf("the parking subscription received %v, want the good events", got)
		}
		var evs []sluice.ParkedEvent
		deadline := time.Now().Add(10 * time.Second)
		for len(evs) < 2 && time.Now().Before(deadline) {
			var err error
			if evs, err = c.ParkedEvents(t.Context(), parker, 10); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(evs) != 2 || evs[0].Position != pos[1] || evs[0].Error != "cannot handle bad" || evs[0].Attempts != 3 ||
			evs[1].Position != pos[3] || evs[1].Error != "handler panicked: handler bug" || string(evs[1].Body) != "panic" {
			t.Fatalf("parked events = %+v", evs)
		}
		// The faulting subscription stopped at "bad", and says why.
		var sub sluice.StreamSubscription
		for sub.Fault == "" && time.Now().Before(deadline) {
			var err error
			if sub, err = c.GetStreamSubscription(t.Context(), faulter); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if sub.Fault == "" || sub.FaultedAt.IsZero() {
			t.Fatalf("faulting subscription = %+v, want a fault", sub)
		}
		time.Sleep(300 * time.Millisecond)
		if got := faulted.positions(faulter, "j"); !slices.Equal(got, pos[:1]) {
			t.Fatalf("the faulted subscription received %v, want only the event before the failure", got)
		}
		// Healed: replay the parked events and clear the fault.
		healed.Store(true)
		n, err := p.Replay(t.Context(), parker, 10)
		if err != nil || n != 2 {
			t.Fatalf("Replay = %d, %v; want 2", n, err)
		}
		if evs, _ := c.ParkedEvents(t.Context(), parker, 10); len(evs) != 0 {
			t.Fatalf("parked events after replay: %+v", evs)
		}
		if err := c.ClearFault(t.Context(), faulter); err != nil {
			t.Fatal(err)
		}
		faulted.waitCount(t, 5, 30*time.Second)
		if got := faulted.positions(faulter, "j"); !slices.Equal(got, pos) {
			t.Fatalf("the resumed subscription received %v, want %v", got, pos)
		}
		if got := parked.positions(parker, "j"); len(got) != 5 {
			t.Fatalf("after replay the parking subscription handled %v", got)
		}
	})
}

// A subscription can start at an older position or at the oldest one
// retention kept; unsubscribing stops delivery.
func TestStreamRewindAndUnsubscribe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		if err := c.SetStreamRetention(ctx, "logs", sluice.StreamRetention{MaxAge: time.Hour}); err != nil {
			t.Fatal(err)
		}
		id := sluice.StreamID{Namespace: "logs", Key: "app"}
		other := sluice.StreamID{Namespace: "logs", Key: "db"}
		pos := publish(t, c, id, "1", "2", "3", "4", "5")
		publish(t, c, other, "x")
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("reader", col.handle, nil)
		})
		fromThird, err := c.Subscribe(ctx, id, "reader", sluice.FromPosition(pos[2]))
		if err != nil {
			t.Fatalf("Subscribe from a position: %v", err)
		}
		all, err := c.Subscribe(ctx, id, "reader", sluice.FromBeginning())
		if err != nil {
			t.Fatalf("Subscribe from the beginning: %v", err)
		}
		col.waitCount(t, 3+5, 30*time.Second)
		if got := col.positions(fromThird.ID, "app"); !slices.Equal(got, pos[2:]) {
			t.Fatalf("from position %d: received %v, want %v", pos[2], got, pos[2:])
		}
		if got := col.positions(all.ID, "app"); !slices.Equal(got, pos) {
			t.Fatalf("from the beginning: received %v, want %v", got, pos)
		}
		subs, err := c.StreamSubscriptions(ctx, id)
		if err != nil || len(subs) != 2 {
			t.Fatalf("StreamSubscriptions = %+v, %v", subs, err)
		}
		if err := c.Unsubscribe(ctx, all.ID); err != nil {
			t.Fatalf("Unsubscribe: %v", err)
		}
		wantErr(t, "Unsubscribe twice", c.Unsubscribe(ctx, all.ID), sluice.ErrSubscriptionNotFound)
		more := publish(t, c, id, "6")
		col.waitCount(t, 9, 30*time.Second)
		time.Sleep(300 * time.Millisecond)
		if got := col.positions(all.ID, "app"); len(got) != 5 {
			t.Fatalf("the removed subscription received %v after Unsubscribe", got)
		}
		if got := col.positions(fromThird.ID, "app"); !slices.Equal(got, append(slices.Clone(pos[2:]), more...)) {
			t.Fatalf("the remaining subscription received %v", got)
		}
		_, err = c.Subscribe(ctx, id, "reader", sluice.FromPosition(0))
		wantErr(t, "Subscribe from position 0", err, sluice.ErrInvalidArgument)
		_, err = c.Subscribe(ctx, sluice.StreamID{Namespace: "bad name!", Key: "k"}, "reader", sluice.FromNow())
		wantErr(t, "Subscribe to an invalid namespace", err, sluice.ErrInvalidName)
	})
}

// A client or processor configured with another partition count than
// the database recorded is refused.
func TestStreamPartitionCount(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		publish(t, c, sluice.StreamID{Namespace: "ns", Key: "k"}, "first")
		other, err := sluice.NewClient(shared.Backend(t, kind), &sluice.Options{Service: service, StreamPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Publish(t.Context(), sluice.StreamID{Namespace: "ns", Key: "k"}, sluice.Event{Body: []byte("x")})
		wantErr(t, "Publish with 8 partitions on a database of 16", err, sluice.ErrPartitionCount)
		p := other.NewStreamProcessor(nil)
		wantErr(t, "processor with 8 partitions on a database of 16", p.Start(t.Context()), sluice.ErrPartitionCount)
		if got := sluice.PartitionOf(sluice.StreamID{Namespace: "orders", Key: "o-1"}, 16); got != sluice.PartitionOf(sluice.StreamID{Namespace: "orders", Key: "o-1"}, 16) || got < 0 || got >= 16 {
			t.Fatalf("PartitionOf = %d", got)
		}
	})
}

// PublishTx commits with the caller's transaction, or not at all.
func TestPublishTx(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, _ string, c *sluice.Client) {
		ctx := t.Context()
		id := sluice.StreamID{Namespace: "outbox", Key: "order-1"}
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("shipper", col.handle, &sluice.ConsumerOptions{Namespace: "outbox"})
		})
		db := rawDB(t, kind)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PublishTx(ctx, tx, id, sluice.Event{Body: []byte("rolled back")}); err != nil {
			t.Fatalf("PublishTx: %v", err)
		}
		tx.Rollback()
		tx, _ = db.BeginTx(ctx, nil)
		pos, err := c.PublishTx(ctx, tx, id, sluice.Event{Body: []byte("a")}, sluice.Event{Body: []byte("b")})
		if err != nil || len(pos) != 2 || pos[1] != pos[0]+1 {
			t.Fatalf("PublishTx = %v, %v", pos, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		col.waitCount(t, 2, 30*time.Second)
		time.Sleep(200 * time.Millisecond)
		if got := col.positions("ns/outbox/shipper", "order-1"); !slices.Equal(got, pos) {
			t.Fatalf("received %v, want the committed events %v only", got, pos)
		}
	})
}

// A client's first PublishTx, in a transaction that already wrote (on
// SQLite it holds the database's only write lock), records the partition
// count in that transaction instead of waiting for it; a client
// configured with another count then gets ErrPartitionCount, in a
// transaction or not.
func TestPublishTxFirstUse(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		db := rawDB(t, kind)
		if _, err := db.ExecContext(ctx, "CREATE TABLE app_"+service[2:]+" (id INTEGER)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Exec("DROP TABLE app_" + service[2:]) })
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO app_"+service[2:]+" (id) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		id := sluice.StreamID{Namespace: "outbox", Key: "first"}
		if _, err := c.PublishTx(ctx, tx, id, sluice.Event{Body: []byte("a")}); err != nil {
			t.Fatalf("first PublishTx of a tenant: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		other, err := sluice.NewClient(shared.Backend(t, kind), &sluice.Options{Service: service, StreamPartitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.Publish(ctx, id, sluice.Event{Body: []byte("b")})
		wantErr(t, "Publish with 8 partitions after a PublishTx recorded 16", err, sluice.ErrPartitionCount)
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		_, err = other.PublishTx(ctx, tx, id, sluice.Event{Body: []byte("c")})
		wantErr(t, "PublishTx with 8 partitions after a PublishTx recorded 16", err, sluice.ErrPartitionCount)
	})
}

// A processor hands its own process's publishes straight to its
// partitions (their tails); publishes of another process (another
// backend on the database) and those of a caller's transaction come in
// between, and it must read those: every event arrives once, in order.
func TestStreamFollowsOtherPublishers(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		ctx := t.Context()
		other := reopen(t, kind, service)
		db := rawDB(t, kind)
		col := newCollector()
		startStreamProcessor(t, c, &sluice.StreamProcessorOptions{PollInterval: 20 * time.Millisecond, IdlePollInterval: 50 * time.Millisecond},
			func(p *sluice.StreamProcessor) {
				// Slower than the publishers, so that the cache holds
				// records when records of others come in between.
				p.Handle("follower", func(ctx context.Context, ev *sluice.StreamEvent) error {
					time.Sleep(2 * time.Millisecond)
					return col.handle(ctx, ev)
				}, &sluice.ConsumerOptions{Namespace: "mixed"})
			})
		id := sluice.StreamID{Namespace: "mixed", Key: "k"}
		const rounds = 60
		var want []int64
		for i := range rounds {
			var (
				pos []int64
				err error
			)
			switch i % 3 {
			case 0:
				pos, err = c.Publish(ctx, id, sluice.Event{Body: []byte("here")}, sluice.Event{Body: []byte("here")})
			case 1:
				pos, err = other.Publish(ctx, id, sluice.Event{Body: []byte("there")})
			case 2:
				tx, terr := db.BeginTx(ctx, nil)
				if terr != nil {
					t.Fatal(terr)
				}
				if pos, err = c.PublishTx(ctx, tx, id, sluice.Event{Body: []byte("tx")}); err == nil {
					err = tx.Commit()
				} else {
					tx.Rollback()
				}
			}
			if err != nil {
				t.Fatalf("round %d: publish: %v", i, err)
			}
			want = append(want, pos...)
		}
		col.waitCount(t, int64(len(want)), 30*time.Second)
		time.Sleep(100 * time.Millisecond)
		if got := col.positions("ns/mixed/follower", "k"); !slices.Equal(got, want) {
			t.Fatalf("delivered %d events %v..., want %d in order %v...", len(got), head(got), len(want), head(want))
		}
	})
}

// Stop ends every goroutine a processor started, including deliveries
// still running at its deadline.
func TestStreamProcessorNoLeak(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			b := shared.Backend(t, kind)
			c, err := sluice.NewClient(b, &sluice.Options{Service: "t-" + randHex(6)})
			if err != nil {
				t.Fatal(err)
			}
			publish(t, c, sluice.StreamID{Namespace: "leak", Key: "warm"}, "x") // records the partition count
			ignore := goleak.IgnoreCurrent()
			started := make(chan struct{}, 1)
			p := c.NewStreamProcessor(nil)
			p.Handle("stuck", func(ctx context.Context, ev *sluice.StreamEvent) error {
				select {
				case started <- struct{}{}:
				default:
				}
				<-ctx.Done() // holds the delivery until the stop's deadline cancels it
				return ctx.Err()
			}, &sluice.ConsumerOptions{Namespace: "leak"})
			if err := p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			publish(t, c, sluice.StreamID{Namespace: "leak", Key: "k"}, "held")
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler was never called")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			// The backend, which outlives the processor, may have grown: each
			// MariaDB connection of its pool has a watcher, and a commit
			// pipeline that moved on from a slow group runs on a goroutine of
			// its own.
			goleak.VerifyNone(t, ignore,
				goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
				goleak.IgnoreAnyFunction("github.com/sluicehq/sluice/store/internal/engine.(*committer).loop"))
		})
	}
}

// Stop returns once its deadline has passed even while a handler
// ignores its context: the processor walks away from that delivery,
// which stays unresolved, and goes again to the next processor.
func TestStreamStopWalksAwayFromStuckHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) })
		started := make(chan struct{}, 1)
		p := c.NewStreamProcessor(nil)
		p.Handle("c", func(ctx context.Context, ev *sluice.StreamEvent) error {
			select {
			case started <- struct{}{}:
			default:
			}
			<-release // ignores ctx
			return nil
		}, &sluice.ConsumerOptions{Namespace: "walk"})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		id := sluice.StreamID{Namespace: "walk", Key: "k"}
		pos := publish(t, c, id, "stuck")
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the handler was never called")
		}
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			stopped <- p.Stop(ctx)
		}()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Stop with a deadline of 200 ms has not returned after 30 s: it waits on a handler that ignores its context")
		}
		once.Do(func() { close(release) }) // the abandoned handler returns, to nobody
		col := newCollector()
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "walk"})
		})
		col.waitCount(t, 1, 30*time.Second)
		if got := col.positions("ns/walk/c", id.Key); !slices.Equal(got, pos) {
			t.Fatalf("the next processor got %v, want the abandoned event again: %v", got, pos)
		}
	})
}

// A subscription faulted while deliveries of other streams are in
// flight, with a handler that ignores its context, resumes without ever
// running two deliveries of one stream at once, and still delivers every
// event in order.
func TestStreamFaultNeverOverlapsAStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		var healed atomic.Bool
		var mu sync.Mutex
		active := make(map[string]int)
		overlaps := 0
		col := newCollector()
		handler := func(ctx context.Context, ev *sluice.StreamEvent) error {
			mu.Lock()
			active[ev.Key]++
			if active[ev.Key] > 1 {
				overlaps++
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				active[ev.Key]--
				mu.Unlock()
			}()
			time.Sleep(30 * time.Millisecond) // ignores ctx
			if string(ev.Body) == "bad" && !healed.Load() {
				return errors.New("bad")
			}
			return col.handle(ctx, ev)
		}
		startStreamProcessor(t, c, nil, func(p *sluice.StreamProcessor) {
			p.Handle("c", handler, &sluice.ConsumerOptions{Namespace: "ov", MaxAttempts: 1, OnFailure: sluice.FaultOnFailure, MaxConcurrency: 8})
		})
		// Streams that share one partition, so that one agent runs them.
		var keys []string
		for i := 0; len(keys) < 6; i++ {
			k := "k-" + strconv.Itoa(i)
			if sluice.PartitionOf(sluice.StreamID{Namespace: "ov", Key: k}, 16) == 3 {
				keys = append(keys, k)
			}
		}
		want := make(map[string][]int64)
		for _, k := range keys {
			bodies := []string{"1", "2", "3"}
			if k == keys[0] {
				bodies = []string{"bad", "2", "3"}
			}
			want[k] = publish(t, c, sluice.StreamID{Namespace: "ov", Key: k}, bodies...)
		}
		const sub = "ns/ov/c"
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := c.GetStreamSubscription(t.Context(), sub)
			if err != nil {
				t.Fatal(err)
			}
			if s.Fault != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the subscription never faulted")
			}
			time.Sleep(5 * time.Millisecond)
		}
		healed.Store(true)
		if err := c.ClearFault(t.Context(), sub); err != nil {
			t.Fatal(err)
		}
		// Events delivered before the fault may come again after it (at
		// least once), each stream's in order.
		// Each delivery is the stream's next event, or a step back (a
		// restart from the subscription's position); never a skip.
		inOrder := func(got, want []int64) bool {
			if len(got) > 0 && got[0] != want[0] {
				return false
			}
			for i := 1; i < len(got); i++ {
				j := slices.Index(want, got[i-1])
				if got[i] > got[i-1] && (j+1 >= len(want) || got[i] != want[j+1]) {
					return false
				}
			}
			return true
		}
		deadline = time.Now().Add(30 * time.Second)
		for _, k := range keys {
			for {
				got := col.positions(sub, k)
				if !inOrder(got, want[k]) {
					t.Fatalf("stream %s received %v, want %v in order", k, got, want[k])
				}
				if n := len(got); n >= 3 && slices.Equal(got[n-3:], want[k]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("stream %s received %v, want it to end with %v", k, got, want[k])
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if overlaps > 0 {
			t.Fatalf("%d deliveries overlapped another of the same stream", overlaps)
		}
	})
}

// clusterOptions make processors heartbeat and fail over quickly.
func clusterOptions(name string) *sluice.StreamProcessorOptions {
	return &sluice.StreamProcessorOptions{Name: name, HeartbeatInterval: 100 * time.Millisecond,
		FailureTimeout: time.Second, ProgressInterval: 20 * time.Millisecond}
}

// pulled returns the partitions a processor pulls.
func pulled(p *sluice.StreamProcessor) []int32 {
	var out []int32
	for _, ps := range p.Stats() {
		if ps.Stopped == "" {
			out = append(out, ps.Partition)
		}
	}
	return out
}

// waitPulled waits until each processor pulls as many partitions as
// want says, and together all 16.
func waitPulled(t *testing.T, within time.Duration, want []int, ps ...*sluice.StreamProcessor) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var got []int
		all := map[int32]bool{}
		for _, p := range ps {
			parts := pulled(p)
			got = append(got, len(parts))
			for _, part := range parts {
				all[part] = true
			}
		}
		if slices.Equal(got, want) && len(all) == 16 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processors pull %v partitions (%d distinct) after %v, want %v", got, len(all), within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On PostgreSQL and MariaDB processors of one tenant share the partitions
// evenly, and one that stops hands its partitions back at once; on
// SQLite a second processor is refused while the first runs.
func TestStreamProcessorsShare(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		first, second := newCollector(), newCollector()
		p1 := startStreamProcessor(t, c, clusterOptions("one"), func(p *sluice.StreamProcessor) {
			p.Handle("c", first.handle, &sluice.ConsumerOptions{Namespace: "share"})
		})
		waitPulled(t, 10*time.Second, []int{16}, p1)
		other := reopen(t, kind, service)
		p2 := other.NewStreamProcessor(clusterOptions("two"))
		p2.Handle("c", second.handle, &sluice.ConsumerOptions{Namespace: "share"})
		if kind == "sqlite" {
			wantErr(t, "a second processor on SQLite", p2.Start(t.Context()), sluice.ErrSingleNode)
			return
		}
		if err := p2.Start(t.Context()); err != nil {
			t.Fatalf("second processor: Start: %v", err)
		}
		defer p2.Stop(context.Background())
		waitPulled(t, 10*time.Second, []int{8, 8}, p1, p2)
		// Every event reaches one of them, each stream's in order.
		var want []int64
		perStream := map[string][]int64{}
		for i := range 64 {
			key := fmt.Sprint("k", i)
			pos := publish(t, c, sluice.StreamID{Namespace: "share", Key: key}, "x", "y", "z")
			perStream[key] = pos
			want = append(want, pos...)
		}
		deadline := time.Now().Add(30 * time.Second)
		for first.n.Load()+second.n.Load() < int64(len(want)) {
			if time.Now().After(deadline) {
				t.Fatalf("delivered %d + %d of %d events", first.n.Load(), second.n.Load(), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if first.n.Load() == 0 || second.n.Load() == 0 {
			t.Fatalf("one processor delivered everything: %d and %d", first.n.Load(), second.n.Load())
		}
		// Each stream's events, every one delivered, each processor's in
		// order (a step back is a redelivery, should a lease have moved).
		for key, pos := range perStream {
			a, b := first.positions("ns/share/c", key), second.positions("ns/share/c", key)
			for _, got := range [][]int64{a, b} {
				for i := 1; i < len(got); i++ {
					if j := slices.Index(pos, got[i-1]); got[i] > got[i-1] && (j+1 >= len(pos) || got[i] != pos[j+1]) {
						t.Fatalf("stream %s: delivered %v, which skips (published %v)", key, got, pos)
					}
				}
			}
			for _, p := range pos {
				if !slices.Contains(a, p) && !slices.Contains(b, p) {
					t.Fatalf("stream %s: position %d never delivered (got %v and %v)", key, p, a, b)
				}
			}
		}
		// ClusterStatus shows the two nodes, their partitions, and no lag
		// once progress is stored.
		deadline = time.Now().Add(10 * time.Second)
		for {
			st, err := c.ClusterStatus(t.Context())
			if err != nil {
				t.Fatalf("ClusterStatus: %v", err)
			}
			var problems []string
			if len(st.Nodes) != 2 || !st.Nodes[0].Alive || !st.Nodes[1].Alive || len(st.Nodes[0].Partitions) != 8 || len(st.Nodes[1].Partitions) != 8 {
				problems = append(problems, fmt.Sprintf("nodes %+v", st.Nodes))
			}
			var lag, head int64
			for _, ps := range st.Partitions {
				if !ps.Held || (ps.Owner != st.Nodes[0].ID && ps.Owner != st.Nodes[1].ID) || len(ps.Subscriptions) != 1 {
					problems = append(problems, fmt.Sprintf("partition %+v", ps))
				}
				lag += ps.Lag
				head += ps.Head
				for _, sl := range ps.Subscriptions {
					lag += sl.Lag
				}
			}
			if len(st.Partitions) != 16 || head < int64(len(want)) || lag != 0 {
				problems = append(problems, fmt.Sprintf("%d partitions, heads add to %d, lag %d", len(st.Partitions), head, lag))
			}
			if len(problems) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ClusterStatus: %v", problems)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// A graceful stop gives the partitions back at once, not after
		// their leases end.
		start := time.Now()
		if err := p2.Stop(t.Context()); err != nil {
			t.Fatalf("second processor: Stop: %v", err)
		}
		waitPulled(t, 900*time.Millisecond, []int{16}, p1)
		t.Logf("the first processor pulls all 16 partitions %v after the second stopped", time.Since(start))
	})
}

// waitHalves waits up to 15 s until the tenant's two stream nodes are
// alive and hold the leases of 8 partitions each, for three lease
// periods (of clusterOptions) on end.
func waitHalves(t *testing.T, c *sluice.Client) {
	t.Helper()
	var steady time.Time
	deadline := time.Now().Add(15 * time.Second)
	for steady.IsZero() || time.Since(steady) < 3*time.Second {
		st, err := c.ClusterStatus(t.Context())
		if err != nil {
			t.Fatalf("ClusterStatus: %v", err)
		}
		held := map[string]int{}
		for _, ps := range st.Partitions {
			if ps.Held {
				held[ps.Owner]++
			}
		}
		ok := len(st.Nodes) == 2
		for _, n := range st.Nodes {
			ok = ok && n.Alive && held[n.ID] == 8
		}
		switch {
		case !ok && time.Now().After(deadline):
			t.Fatalf("nodes %+v, leases held %v, want both alive with 8 each", st.Nodes, held)
		case !ok:
			steady = time.Time{}
		case steady.IsZero():
			steady = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A handler that ignores its context holds up only its own partition: the
// node that gives that partition back to a newcomer keeps heartbeating and
// renewing the rest, and the partition, not given back while its agent
// cannot stop, changes hands once its lease ends; its event is delivered
// again there.
func TestStreamStuckHandlerHoldsOnlyItsPartition(t *testing.T) {
	forEachBackendKind(t, func(t *testing.T, kind, service string, c *sluice.Client) {
		if kind == "sqlite" {
			t.Skip("SQLite runs one stream node at a time")
		}
		// The newcomer takes the first node's highest partitions.
		id := sluice.StreamID{Namespace: "stuck"}
		for i := 0; sluice.PartitionOf(id, 16) != 15; i++ {
			id.Key = fmt.Sprint("k", i)
		}
		release := make(chan struct{})
		defer close(release) // before the processors stop
		stuck := make(chan struct{}, 1)
		p1 := startStreamProcessor(t, c, clusterOptions("one"), func(p *sluice.StreamProcessor) {
			p.Handle("c", func(ctx context.Context, ev *sluice.StreamEvent) error {
				select {
				case stuck <- struct{}{}:
				default:
				}
				<-release // ignores ctx
				return nil
			}, &sluice.ConsumerOptions{Namespace: "stuck"})
		})
		waitPulled(t, 10*time.Second, []int{16}, p1)
		publish(t, c, id, "stuck")
		select {
		case <-stuck:
		case <-time.After(10 * time.Second):
			t.Fatal("the event never reached the first processor")
		}
		col := newCollector()
		p2 := startStreamProcessor(t, reopen(t, kind, service), clusterOptions("two"), func(p *sluice.StreamProcessor) {
			p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "stuck"})
		})
		waitHalves(t, c)
		if col.positions("ns/stuck/c", id.Key) == nil {
			t.Fatalf("the newcomer did not deliver the stuck partition's event")
		}
		if got := pulled(p1); len(got) != 8 || slices.Contains(got, 15) {
			t.Fatalf("the first processor pulls %v", got)
		}
		if got := pulled(p2); len(got) != 8 || !slices.Contains(got, 15) {
			t.Fatalf("the newcomer pulls %v", got)
		}
	})
}

// A node whose progress saves hang (another transaction holds a
// partition's checkpoint row) keeps heartbeating while it gives
// partitions to a newcomer: the agents it stops cannot store their final
// progress, yet it stays alive with its share, and the partitions it
// could not give back change hands once their leases end. (The node is
// the same on every backend; PostgreSQL holds the row here.)
func TestStreamSlowFinalSaveKeepsNodeAlive(t *testing.T) {
	const kind = "postgres"
	b := shared.Backend(t, kind)
	service := "t-" + randHex(6)
	c, err := sluice.NewClient(b, &sluice.Options{Service: service, Logger: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	first, second := newCollector(), newCollector()
	p1 := startStreamProcessor(t, c, clusterOptions("one"), func(p *sluice.StreamProcessor) {
		p.Handle("c", first.handle, &sluice.ConsumerOptions{Namespace: "slow"})
	})
	waitPulled(t, 10*time.Second, []int{16}, p1)

	// Hold partition 0's checkpoint row, and give the node progress of
	// partition 0 to save: its saves wait from here.
	db, err := sql.Open("pgx", shared.DSN(kind))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), "SELECT 1 FROM sluice_partition_checkpoints WHERE service = $1 AND provider = $2 AND partition = 0 FOR UPDATE",
		service, sluice.DefaultProvider); err != nil {
		t.Fatal(err)
	}
	id := sluice.StreamID{Namespace: "slow"}
	for i := 0; sluice.PartitionOf(id, 16) != 0; i++ {
		id.Key = fmt.Sprint("k", i)
	}
	publish(t, c, id, "x")
	deadline := time.Now().Add(10 * time.Second)
	for first.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("partition 0's event never delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a save of it starts, and waits

	p2 := startStreamProcessor(t, reopen(t, kind, service), clusterOptions("two"), func(p *sluice.StreamProcessor) {
		p.Handle("c", second.handle, &sluice.ConsumerOptions{Namespace: "slow"})
	})
	waitHalves(t, c)
	// Once the row is free, the first node's saves go through again.
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	waitPulled(t, 10*time.Second, []int{8, 8}, p1, p2)
	publish(t, c, id, "y")
	deadline = time.Now().Add(10 * time.Second)
	for len(first.positions("ns/slow/c", id.Key)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 delivered %v after the row was free, want 2 events", first.positions("ns/slow/c", id.Key))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A processor's stats follow its deliveries: they show the last event
// handled soon after it was, although an agent publishes them at most
// every few milliseconds while deliveries come thousands a second. With
// polls, saves and refreshes a minute apart, nothing but that bound steps
// the agent again once the last delivery is in.
func TestStreamStatsFollowDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		col := newCollector()
		p := startStreamProcessor(t, c, &sluice.StreamProcessorOptions{PollInterval: time.Minute, IdlePollInterval: time.Minute,
			ProgressInterval: time.Minute, RefreshInterval: time.Minute},
			func(p *sluice.StreamProcessor) {
				p.Handle("c", col.handle, &sluice.ConsumerOptions{Namespace: "statsfollow"})
			})
		waitPulled(t, 10*time.Second, []int{16}, p)
		id := sluice.StreamID{Namespace: "statsfollow", Key: "k"}
		bodies := make([]string, 300)
		for i := range bodies {
			bodies[i] = fmt.Sprint(i)
		}
		pos := publish(t, c, id, bodies...)
		last, part := pos[len(pos)-1], sluice.PartitionOf(id, 16)
		col.waitCount(t, int64(len(pos)), 30*time.Second)
		// Seconds, not the bound's milliseconds: a loaded machine may be
		// slow to step, but far from the minute of the poll interval.
		deadline := time.Now().Add(5 * time.Second)
		for {
			var got int64 = -1
			for _, st := range p.Stats() {
				for _, s := range st.Subscriptions {
					if st.Partition == part && s.Handled {
						got = s.Position
					}
				}
			}
			if got == last {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s after the last of %d events was handled, the stats show position %d, want %d", len(pos), got, last)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
