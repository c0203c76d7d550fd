package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// The stream-lagging scenario (issue 16): two namespace consumers of one
// processor, fast (a handler that returns at once) and lag, which lags
// as --lag says:
//
//   - stopped: its handler blocks;
//   - slow: it handles 1% of the publish rate (a token bucket shared by
//     its deliveries);
//   - replay: --messages events of history are published first, and lag,
//     at full speed, is repositioned to the oldest of them as the
//     measured publishing starts.
//
// Publishers publish --messages events open loop at --rate to 1,000
// streams, and the same run is made with fast alone (the same history
// for replay): the fast consumer's events/s and publish-to-handler
// latency beside that no-lag run are what the issue asks for. Then lag is
// released (full speed) until it reaches the head, so that what the
// lagging windows read from storage (RehydratedRecords) can be set
// against the records lag needed from beyond the head window. The caches
// are sampled every 10 ms: their records against the budget
// (--cache-records a partition), and the process's resident memory.

// lagModes are the values of --lag.
var lagModes = []string{"stopped", "slow", "replay"}

const (
	lagStreams = 1000
	// lagFastWait bounds the wait for fast's last events once publishing
	// ends, and lagCatchUp lag's catch-up once released: a stall shows
	// as events short of what was published, never as a hung bench.
	lagFastWait = 60 * time.Second
	lagCatchUp  = 120 * time.Second
)

func benchStreamLagging(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	// Alternate which run goes first, so that drift on a shared machine
	// does not favour one of them across --runs.
	e.round++
	order := []bool{false, true}
	if e.round%2 == 0 {
		order = []bool{true, false}
	}
	var out [2]benchResult
	for _, withLag := range order {
		r, err := e.lagRun(ctx, withLag)
		if err != nil {
			return nil, err
		}
		if withLag {
			out[1] = r
		} else {
			out[0] = r
		}
	}
	base, lag := out[0], &out[1]
	ratio := func(a, b float64) *float64 {
		if b == 0 {
			return nil
		}
		v := a / b
		return &v
	}
	lag.RateRatio = ratio(base.MsgsPerSec, lag.MsgsPerSec) // > 1: slower than without lag
	lag.P50Ratio = ratio(lag.P50ms, base.P50ms)
	lag.P99Ratio = ratio(lag.P99ms, base.P99ms)
	if lag.ReplaySeconds != nil {
		// The events published while the replay ran, beside the no-lag
		// run's published over the same span.
		span := time.Duration(*lag.ReplaySeconds * float64(time.Second))
		lag.ReplayP99Ratio = ratio(percentile(lag.samples, span, 0.99), percentile(base.samples, span, 0.99))
	}
	return out[:], nil
}

// lagRun is one run of stream-lagging, with the lagging consumer or
// without it.
type lagRun struct {
	e       *benchEnv
	withLag bool
	ns      string
	epoch   time.Time
	p       *sluice.StreamProcessor
	// release ends lag's lagging: it runs at full speed from then on.
	release  chan struct{}
	fastLat  latencies
	samples  lagSamples
	fastGot  atomic.Int64
	fastLast atomic.Int64 // when fast got its latest event, since epoch
	pace     pacer
	mem      memSampler
	marks    lagMarks
	needed   atomic.Int64 // see lagHandler
	// For replay: the history's size, lag's events, and when (since the
	// first measured publish) lag had as many as the history and fast's
	// together, that is, when the replay reached the head.
	history  int64
	lagGot   atomic.Int64
	pubStart atomic.Int64
	replayed atomic.Int64
}

func (e *benchEnv) lagRun(ctx context.Context, withLag bool) (benchResult, error) {
	l := &lagRun{e: e, withLag: withLag, ns: "bench-" + randomHex(4), epoch: time.Now(), release: make(chan struct{})}
	l.pace.every = time.Duration(float64(100*time.Second) / float64(max(e.cfg.rate, 1)))
	defer l.cleanup(ctx)
	// Records stay (no trimming behind the consumers), in both runs: the
	// replay needs its history, and a lagging consumer holds trimming
	// back anyway, so both runs write alike.
	if err := e.client.SetStreamRetention(ctx, l.ns, sluice.StreamRetention{MaxAge: sluice.Forever}); err != nil {
		return benchResult{}, err
	}
	if e.cfg.lag == "replay" {
		n, err := l.publishHistory(ctx)
		if err != nil {
			return benchResult{}, err
		}
		l.history = n
	}
	l.mem.prepare()
	if err := l.start(ctx); err != nil {
		return benchResult{}, err
	}
	from, err := l.lagStart(ctx)
	if err != nil {
		return benchResult{}, err
	}
	l.mem.start(ctx, l.p, &l.marks)
	published, elapsed, err := l.publish(ctx)
	if err != nil {
		return benchResult{}, err
	}
	// Fast's figures and the caches' as fast got everything (or gave up).
	r := result(l.fastGot.Load(), elapsed, &l.fastLat)
	r.samples = l.samples.all()
	while := l.p.Stats()
	l.mem.ended.Store(true)
	close(l.release)
	caughtUp := true
	var walked int64
	if withLag {
		caughtUp, walked, err = l.catchUp(ctx, from)
		if err != nil {
			return benchResult{}, err
		}
	}
	after := l.p.Stats()
	l.mem.stop()
	r.Producers, r.Batch, r.Rate = e.cfg.producers, e.cfg.batch, e.cfg.rate
	r.Lag, r.Published = "none", &published
	if withLag {
		r.Lag = e.cfg.lag
		r.LagWalked, r.CaughtUp = &walked, &caughtUp
		r.rehydration(while, after)
	}
	r.History = l.history
	if at := l.replayed.Load(); at > 0 { // set only by a replaying lag
		v := time.Duration(at).Seconds()
		r.ReplaySeconds = &v
	}
	r.CacheRecords, r.BudgetRecords = e.cfg.cacheRecords, e.cfg.cacheRecords*benchPartitions
	r.memory(&l.mem)
	if withLag {
		needed := l.needed.Load()
		v := float64(*r.RehydratedRecords) / float64(max(needed, 1))
		r.LagNeeded, r.RehydrationRatio = &needed, &v
	}
	return r, nil
}

// publishHistory publishes --messages events, 100 a call, before any
// consumer runs: the replay's history.
func (l *lagRun) publishHistory(ctx context.Context) (int64, error) {
	body := payload(l.e.cfg.size)
	var (
		left   atomic.Int64
		wg     sync.WaitGroup
		failed firstError
	)
	left.Store(int64(l.e.cfg.messages))
	for range l.e.cfg.producers {
		wg.Go(func() {
			for {
				n := min(left.Add(-100)+100, 100)
				if n <= 0 {
					return
				}
				evs := make([]sluice.Event, n)
				for i := range evs {
					evs[i] = sluice.Event{Body: body}
				}
				id := sluice.StreamID{Namespace: l.ns, Key: "s-" + strconv.Itoa(rand.IntN(lagStreams))}
				if _, err := l.e.client.Publish(ctx, id, evs...); err != nil {
					failed.set(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return int64(l.e.cfg.messages), failed.get()
}

// start starts the processor with fast, and lag when the run has it.
func (l *lagRun) start(ctx context.Context) error {
	rate := l.e.cfg.laggingRate
	if rate < 0 {
		rate = sluice.UnboundedLagging
	}
	l.p = l.e.client.NewStreamProcessor(&sluice.StreamProcessorOptions{
		CacheRecords: l.e.cfg.cacheRecords, CacheWindows: l.e.cfg.cacheWindows, LaggingRate: rate})
	fast := func(ctx context.Context, ev *sluice.StreamEvent) error {
		now := time.Since(l.epoch)
		sent := time.Duration(binary.BigEndian.Uint64(ev.Body))
		l.fastLat.add(now - sent)
		l.samples.add(sent-time.Duration(l.pubStart.Load()), now-sent)
		l.fastGot.Add(1)
		l.fastLast.Store(int64(now))
		return nil
	}
	if err := l.p.Handle("fast", fast, &sluice.ConsumerOptions{Namespace: l.ns}); err != nil {
		return err
	}
	if l.withLag {
		// A blocked delivery must not time out (and be retried) within
		// the run.
		opts := &sluice.ConsumerOptions{Namespace: l.ns, DeliveryTimeout: time.Hour}
		if err := l.p.Handle("lag", l.lagHandler, opts); err != nil {
			return err
		}
	}
	if err := l.p.Start(ctx); err != nil {
		return err
	}
	return waitPulling(ctx, l.p)
}

// lagHandler lags as --lag says until release. It first counts the
// event as needed from storage when its position is below the head
// window's start (lag walked it in a window of its own) and above what
// the last split carried into that window (those records were held
// already). The marks are sampled every 10 ms, so a record read in the
// interval after a split is missed, and one a split carried in the
// interval after another counted.
func (l *lagRun) lagHandler(ctx context.Context, ev *sluice.StreamEvent) error {
	if p := ev.Partition; ev.Attempt == 1 && p >= 0 && p < benchPartitions &&
		ev.Position < l.marks.head[p].Load() && ev.Position > l.marks.carried[p].Load() {
		l.needed.Add(1)
	}
	if got := l.lagGot.Add(1); l.history > 0 && l.replayed.Load() == 0 && got >= l.history+l.fastGot.Load() {
		if start := l.pubStart.Load(); start > 0 {
			l.replayed.CompareAndSwap(0, int64(time.Since(l.epoch))-start)
		}
	}
	switch l.e.cfg.lag {
	case "stopped":
		select {
		case <-l.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	case "slow":
		return l.pace.wait(ctx, l.release)
	}
	return nil
}

// lagStart waits until the processor runs every subscription of the
// run, and returns where lag starts on each partition: where its
// subscription was stored, or, for replay, the oldest record, where it
// is repositioned.
func (l *lagRun) lagStart(ctx context.Context) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	consumers := []string{"fast"}
	if l.withLag {
		consumers = append(consumers, "lag")
	}
	for {
		stats := l.p.Stats()
		pos, id := consumerPositions(stats, consumers[len(consumers)-1])
		if fast, _ := consumerPositions(stats, "fast"); len(pos) == benchPartitions && len(fast) == benchPartitions {
			if !l.withLag || l.e.cfg.lag != "replay" {
				return pos, nil
			}
			r, err := l.e.client.RepositionStreamSubscription(ctx, id, sluice.FromBeginning(), &sluice.RepositionOptions{By: "bench"})
			if err != nil {
				return nil, err
			}
			l.marks.note(stats) // lag's first events may come before the first sample
			return r.ToPositions, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the processor runs %s on %d of %d partitions after 30 s", consumers, len(pos), benchPartitions)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// consumerPositions returns the position of a consumer's subscription
// on each partition where the processor handles it, and its ID. A run's
// consumers have one subscription each, to the run's namespace: earlier
// runs' are deleted with them.
func consumerPositions(stats []sluice.StreamPartitionStats, consumer string) (map[int32]int64, string) {
	pos := make(map[int32]int64)
	id := ""
	for _, ps := range stats {
		for _, s := range ps.Subscriptions {
			if s.Consumer == consumer && s.Handled {
				pos[ps.Partition], id = s.Position, s.ID
			}
		}
	}
	return pos, id
}

// publish publishes --messages events at --rate from --producers
// Poisson publishers, --batch a call, each stamped with its publish
// time, then waits for fast to get them all (lagFastWait at most). It
// returns what was published and the time from the first publish to
// fast's last event (to the end of the wait if fast got fewer).
func (l *lagRun) publish(ctx context.Context) (int64, time.Duration, error) {
	e := l.e
	body := payload(max(e.cfg.size, 8))
	var (
		left      atomic.Int64
		published atomic.Int64
		wg        sync.WaitGroup
		failed    firstError
	)
	left.Store(int64(e.cfg.messages))
	interval := time.Duration(float64(time.Second) * float64(e.cfg.producers*e.cfg.batch) / float64(max(e.cfg.rate, 1)))
	start := time.Now()
	l.pubStart.Store(int64(start.Sub(l.epoch)))
	for range e.cfg.producers {
		wg.Go(func() {
			next := start
			for {
				n := min(left.Add(-int64(e.cfg.batch))+int64(e.cfg.batch), int64(e.cfg.batch))
				if n <= 0 {
					return
				}
				if e.cfg.rate > 0 {
					next = next.Add(time.Duration(rand.ExpFloat64() * float64(interval)))
					if d := time.Until(next); d > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(d):
						}
					}
				}
				evs := make([]sluice.Event, n)
				for i := range evs {
					b := slices.Clone(body)
					binary.BigEndian.PutUint64(b, uint64(time.Since(l.epoch)))
					evs[i] = sluice.Event{Body: b}
				}
				id := sluice.StreamID{Namespace: l.ns, Key: "s-" + strconv.Itoa(rand.IntN(lagStreams))}
				if _, err := e.client.Publish(ctx, id, evs...); err != nil {
					failed.set(err)
					return
				}
				published.Add(n)
			}
		})
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		return 0, 0, err
	}
	want := published.Load()
	deadline := time.Now().Add(lagFastWait)
	for l.fastGot.Load() < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	if l.fastGot.Load() < want {
		return want, time.Since(start), nil
	}
	return want, l.epoch.Add(time.Duration(l.fastLast.Load())).Sub(start), nil
}

// catchUp waits (lagCatchUp at most) until lag, released, has walked to
// the head of every partition's log, and returns whether it did and how
// many records it walked since from.
func (l *lagRun) catchUp(ctx context.Context, from map[int32]int64) (bool, int64, error) {
	target := make(map[int32]int64)
	for p := range int32(benchPartitions) {
		info, err := l.e.store.PartitionInfo(ctx, p)
		if err != nil {
			return false, 0, err
		}
		target[p] = info.Head
	}
	deadline := time.Now().Add(lagCatchUp)
	for {
		pos, _ := consumerPositions(l.p.Stats(), "lag")
		done := len(pos) == len(target)
		var walked int64
		for p, t := range target {
			walked += pos[p] - from[p]
			if pos[p] < t {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			return done, walked, nil
		}
		select {
		case <-ctx.Done():
			return false, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cleanup stops the processor, deletes the run's subscriptions and
// trims what it published, so that the next run starts alike.
func (l *lagRun) cleanup(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	l.mem.stop()
	if l.p == nil {
		return
	}
	select {
	case <-l.release:
	default:
		close(l.release)
	}
	var ids []string
	for _, c := range []string{"fast", "lag"} {
		if _, id := consumerPositions(l.p.Stats(), c); id != "" {
			ids = append(ids, id)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = l.p.Stop(sctx)
	for _, id := range ids {
		_ = l.e.client.Unsubscribe(ctx, id)
	}
	// The records go once the namespace no longer keeps them.
	_ = l.e.client.SetStreamRetention(ctx, l.ns, sluice.StreamRetention{})
	l.e.trimAll(ctx, benchPartitions)
}

// lagDefaults checks stream-lagging's flags and fills in its defaults
// (set names the flags given): --rate 1,000 a second, --messages ten
// times what the partitions' caches hold.
func (c *benchConfig) lagDefaults(set map[string]bool) error {
	if !slices.Contains(lagModes, c.lag) {
		return fmt.Errorf("--lag %q: use one of %v", c.lag, lagModes)
	}
	if c.cacheRecords < 1 || c.cacheWindows < 0 || c.cacheWindows > sluice.MaxCacheWindows {
		return fmt.Errorf("--cache-records %d, --cache-windows %d: at least 1 record, at most %d windows (0: the default)",
			c.cacheRecords, c.cacheWindows, sluice.MaxCacheWindows)
	}
	if !set["rate"] {
		c.rate = 1000
	}
	if c.lag == "slow" && c.rate <= 0 {
		return fmt.Errorf("--lag slow handles 1%% of --rate: give a positive one")
	}
	if !set["messages"] {
		c.messages = 10 * c.cacheRecords * benchPartitions
	}
	if c.messages < 1 || c.batch < 1 || c.producers < 1 {
		return fmt.Errorf("--messages %d, --batch %d, --producers %d: at least 1 each", c.messages, c.batch, c.producers)
	}
	return nil
}

// lagSample is one of fast's events: when it was published, since the
// first measured publish, and how long it took to reach the handler.
type lagSample struct{ at, took time.Duration }

// lagSamples collects fast's events, safe for concurrent use.
type lagSamples struct {
	mu sync.Mutex
	s  []lagSample
}

func (l *lagSamples) add(at, took time.Duration) {
	l.mu.Lock()
	l.s = append(l.s, lagSample{at, took})
	l.mu.Unlock()
}

func (l *lagSamples) all() []lagSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.s)
}

// percentile is the q-quantile of the samples' times, in ms, over those
// published before until (all: 0); 0 when there are none.
func percentile(s []lagSample, until time.Duration, q float64) float64 {
	var d []time.Duration
	for _, x := range s {
		if until == 0 || x.at < until {
			d = append(d, x.took)
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
}
