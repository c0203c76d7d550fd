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

// benchStreamE2E publishes to 1,000 streams from --producers publishers
// (--batch events a call; with --rate, that many events a second in all,
// as Poisson arrivals)
// while a processor delivers every event to --subscriptions namespace
// subscriptions; it reports events published and delivered to all of
// them per second, and publish-to-handler latency.
func benchStreamE2E(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	const streams = 1000
	ns := "bench-" + randomHex(4)
	body := payload(e.cfg.size)
	epoch := time.Now()
	var (
		lat       latencies
		published atomic.Int64
		delivered atomic.Int64
		errMu     sync.Mutex
		firstErr  error
	)
	fail := func(err error) {
		errMu.Lock()
		firstErr = cmpErr(firstErr, err)
		errMu.Unlock()
	}
	p := e.client.NewStreamProcessor(nil)
	for i := range e.cfg.subs {
		err := p.Handle("consumer-"+strconv.Itoa(i), func(ctx context.Context, ev *sluice.StreamEvent) error {
			lat.add(time.Since(epoch) - time.Duration(binary.BigEndian.Uint64(ev.Body)))
			delivered.Add(1)
			return nil
		}, &sluice.ConsumerOptions{Namespace: ns})
		if err != nil {
			return nil, err
		}
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	defer p.Stop(context.WithoutCancel(ctx))

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
				if _, err := e.client.Publish(runCtx, id, evs...); err != nil {
					if runCtx.Err() == nil {
						fail(err)
					}
					return
				}
				published.Add(int64(len(evs)))
			}
		})
	}
	wg.Wait()
	want := published.Load() * int64(e.cfg.subs)
	deadline := time.Now().Add(60 * time.Second)
	for delivered.Load() < want && time.Now().Before(deadline) && firstErr == nil {
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	if got := delivered.Load(); got < want {
		return nil, fmt.Errorf("handlers got %d of %d deliveries within 60 s of the end", got, want)
	}
	r := result(published.Load(), elapsed, &lat)
	subs := e.cfg.subs
	r.Producers, r.Batch, r.Rate, r.Subs = e.cfg.producers, e.cfg.batch, e.cfg.rate, &subs
	r.Note = "events/s delivered to every subscription; p50/p99: publish to handler"
	return []benchResult{r}, nil
}
