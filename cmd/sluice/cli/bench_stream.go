package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// benchStreamE2E publishes to 1,000 streams from --producers publishers
// (--batch events a call; with --rate, that many events a second in all,
// as Poisson arrivals)
// while a processor delivers every event to --subscriptions namespace
// subscriptions; it reports events published and delivered to all of
// them per second, and publish-to-handler latency.
func benchStreamE2E(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	r, err := e.streamE2E(ctx, "bench-"+randomHex(4), func(ns string, h sluice.StreamHandler) (func(), error) {
		p := e.client.NewStreamProcessor(nil)
		for i := range e.cfg.subs {
			if err := p.Handle("consumer-"+strconv.Itoa(i), h, &sluice.ConsumerOptions{Namespace: ns}); err != nil {
				return nil, err
			}
		}
		if err := p.Start(ctx); err != nil {
			return nil, err
		}
		stop := func() { p.Stop(context.WithoutCancel(ctx)) }
		if err := waitPulling(ctx, p); err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	})
	if err != nil {
		return nil, err
	}
	return []benchResult{r}, nil
}

// streamE2E runs the stream-e2e measurement on namespace ns: consume
// starts what delivers the namespace's events to --subscriptions
// consumers through h, and returns once they pull every partition, with
// a function that stops them.
func (e *benchEnv) streamE2E(ctx context.Context, ns string, consume func(ns string, h sluice.StreamHandler) (func(), error)) (benchResult, error) {
	const streams = 1000
	body := payload(e.cfg.size)
	epoch := time.Now()
	var (
		lat        latencies
		publishing latencies // Publish alone
		published  atomic.Int64
		delivered  atomic.Int64
		failed     firstError
	)
	fail := failed.set
	stopConsumers, err := consume(ns, func(ctx context.Context, ev *sluice.StreamEvent) error {
		lat.add(time.Since(epoch) - time.Duration(binary.BigEndian.Uint64(ev.Body)))
		delivered.Add(1)
		return nil
	})
	if err != nil {
		return benchResult{}, err
	}
	defer stopConsumers()

	runCtx, stop := context.WithTimeout(ctx, e.cfg.duration)
	defer stop()
	var interval time.Duration
	if e.cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(e.cfg.producers*e.cfg.batch) / float64(e.cfg.rate))
	}
	var wg sync.WaitGroup
	start := time.Now()
	for range e.cfg.producers {
		wg.Go(func() {
			// At a fixed rate, each producer publishes at exponentially
			// distributed intervals (a Poisson process, as independent
			// sources make), rather than all of them in step.
			next := start
			for runCtx.Err() == nil {
				if interval > 0 {
					next = next.Add(time.Duration(rand.ExpFloat64() * float64(interval)))
					if d := time.Until(next); d > 0 {
						select {
						case <-runCtx.Done():
							return
						case <-time.After(d):
						}
					}
				}
				evs := make([]sluice.Event, e.cfg.batch)
				for i := range evs {
					b := slices.Clone(body)
					binary.BigEndian.PutUint64(b, uint64(time.Since(epoch)))
					evs[i] = sluice.Event{Body: b}
				}
				id := sluice.StreamID{Namespace: ns, Key: "s-" + strconv.Itoa(rand.IntN(streams))}
				t0 := time.Now()
				// A publish under way when the time is up finishes and
				// counts: cutting it short would waste its commit (and, on
				// a slow machine, leave a short run with none).
				_, err := e.client.Publish(ctx, id, evs...)
				publishing.add(time.Since(t0))
				if err != nil {
					fail(err)
					return
				}
				published.Add(int64(len(evs)))
			}
		})
	}
	wg.Wait()
	want := published.Load() * int64(e.cfg.subs)
	deadline := time.Now().Add(60 * time.Second)
	for delivered.Load() < want && time.Now().Before(deadline) && failed.get() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if err := failed.get(); err != nil {
		return benchResult{}, err
	}
	if got := delivered.Load(); got < want {
		return benchResult{}, fmt.Errorf("handlers got %d of %d deliveries within 60 s of the end", got, want)
	}
	r := result(published.Load(), elapsed, &lat)
	subs := e.cfg.subs
	r.Producers, r.Batch, r.Rate, r.Subs = e.cfg.producers, e.cfg.batch, e.cfg.rate, &subs
	r.Note = "events/s delivered to every subscription; p50/p99: publish to handler"
	// What of that latency is the publish (its commit).
	p50, p99 := publishing.percentiles()
	r.PublishP50ms, r.PublishP99ms = &p50, &p99
	return r, nil
}

// benchStreamBacklog publishes --messages events (--producers, --batch)
// while the only subscription's handler is stuck, so that every event
// waits behind it, and samples the process's resident memory: it must
// stay within the processor's cache budget plus a constant, whatever the
// backlog.
func benchStreamBacklog(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	ns := "bench-" + randomHex(4)
	const cacheBytes = 16 << 20
	// Records unbounded in count, so that the byte budget is what binds.
	p := e.client.NewStreamProcessor(&sluice.StreamProcessorOptions{CacheBytes: cacheBytes, CacheRecords: 1 << 20})
	stuck := make(chan struct{})
	err := p.Handle("stopped", func(ctx context.Context, ev *sluice.StreamEvent) error {
		select {
		case <-stuck:
		case <-ctx.Done():
		}
		return ctx.Err()
	}, &sluice.ConsumerOptions{Namespace: ns})
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		close(stuck)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		p.Stop(sctx)
	}()
	base := residentBytes()
	var peak atomic.Int64
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if rss := residentBytes(); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	body := payload(e.cfg.size)
	var (
		lat       latencies
		published atomic.Int64
		wg        sync.WaitGroup
		failed    firstError
	)
	start := time.Now()
	for range e.cfg.producers {
		wg.Go(func() {
			for published.Load() < int64(e.cfg.messages) {
				n, err := e.publishBatch(ctx, ns, body, &lat)
				if err != nil {
					failed.set(err)
					return
				}
				published.Add(int64(n))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(time.Second) // let the agents read what they may
	stopSampling()
	<-sampled
	if err := failed.get(); err != nil {
		return nil, err
	}
	var cached int64
	for _, ps := range p.Stats() {
		cached += ps.CachedBytes
	}
	r := result(published.Load(), elapsed, &lat)
	r.Producers, r.Batch = e.cfg.producers, e.cfg.batch
	budget := int64(16 * cacheBytes)
	r.PeakRSSMiB = float64(peak.Load()) / (1 << 20)
	r.BudgetMiB = float64(budget) / (1 << 20)
	r.Note = fmt.Sprintf("p50/p99: one Publish; resident %.0f MiB before publishing, peak %.0f MiB; caches hold %.1f MiB of a %.0f MiB budget (16 partitions x 16 MiB)",
		float64(base)/(1<<20), r.PeakRSSMiB, float64(cached)/(1<<20), r.BudgetMiB)
	return []benchResult{r}, nil
}

// residentBytes is the process's resident memory, from /proc (0 where
// there is none).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// benchPartitions is the stream partition count of the bench's tenants.
const benchPartitions = 16

// waitPulling waits until a processor pulls every partition, so that a
// scenario measures a running processor rather than its start.
func waitPulling(ctx context.Context, p *sluice.StreamProcessor) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats := p.Stats()
		pulling := 0
		for _, s := range stats {
			if s.Epoch > 0 && s.Stopped == "" {
				pulling++
			}
		}
		if pulling == benchPartitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processor pulls %d of %d partitions after 30 s", pulling, benchPartitions)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// publishBatch publishes --batch events of body to a random one of 1,000
// streams of ns, adds how long Publish took to lat, and returns how many
// events it published.
func (e *benchEnv) publishBatch(ctx context.Context, ns string, body []byte, lat *latencies) (int, error) {
	evs := make([]sluice.Event, e.cfg.batch)
	for i := range evs {
		evs[i] = sluice.Event{Body: body}
	}
	id := sluice.StreamID{Namespace: ns, Key: "s-" + strconv.Itoa(rand.IntN(1000))}
	t0 := time.Now()
	if _, err := e.client.Publish(ctx, id, evs...); err != nil {
		return 0, err
	}
	lat.add(time.Since(t0))
	return len(evs), nil
}
