package cli

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// benchProcessor drains --messages pre-loaded messages through
// --consumers processors of --lease-batch handlers each, whose handler
// does nothing: the rate the Processor itself sustains, receives and
// completes included, with each message's enqueue-to-handler time (its
// wait in the backlog included).
func benchProcessor(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	const q = "bench-processor"
	if e.cfg.messages < 1 || e.cfg.consumers < 1 {
		return nil, errors.New("processor: --messages and --consumers must be at least 1")
	}
	drop, err := e.preloadedQueue(ctx, q)
	if err != nil {
		return nil, err
	}
	defer drop()
	var (
		lat     latencies
		handled atomic.Int64
		first   = make(chan struct{})
		done    = make(chan struct{})
		closed  atomic.Bool
	)
	h := func(_ context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
		lat.add(time.Since(m.EnqueuedTime))
		n := handled.Add(1)
		if n == 1 {
			close(first)
		}
		if n == int64(e.cfg.messages) && closed.CompareAndSwap(false, true) {
			close(done)
		}
		return nil
	}
	procs := make([]*sluice.Processor, e.cfg.consumers)
	for i := range procs {
		if procs[i], err = e.client.NewProcessor(q, h, &sluice.ProcessorOptions{MaxConcurrent: e.cfg.leaseBatch}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	for _, p := range procs {
		if err := p.Start(ctx); err != nil {
			return nil, err
		}
	}
	// The run lasts --duration, but never ends before the first delivery:
	// on a loaded machine a short run could otherwise measure nothing.
	select {
	case <-done:
	case <-time.After(e.cfg.duration):
	case <-ctx.Done():
	}
	select {
	case <-first:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	count := handled.Load()
	for _, p := range procs {
		if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
	}
	r := result(count, elapsed, &lat)
	r.Consumers, r.Batch = e.cfg.consumers, e.cfg.leaseBatch
	r.Note = "p50/p99: enqueue to handler, the backlog's wait included"
	return []benchResult{r}, nil
}
