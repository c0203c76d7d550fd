package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// processorFlags are the processor scenario's own flags.
type processorFlags struct {
	steady   bool
	prefetch int
}

// register adds the processor scenario's flags to fs.
func (f *processorFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.steady, "steady", false, "processor: --producers send (at --rate, or as fast as they can) while the processors drain, from an empty queue")
	fs.IntVar(&f.prefetch, "prefetch", 0, "processor: each processor's ProcessorOptions.PrefetchCount; session-processor: SessionProcessorOptions.PrefetchCount")
}

// benchProcessor measures --consumers processors of --lease-batch
// handlers each (and --prefetch prefetched messages), whose handler does
// nothing: the rate the Processor itself sustains, receives and completes
// included. By default they drain --messages pre-loaded messages, and the
// latency runs from enqueue to handler, the backlog's wait included. With
// --steady, --producers send one message a call while the processors
// drain, from an empty queue, so that slots free one at a time; the
// latency runs from send to handler.
func benchProcessor(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	const q = "bench-processor"
	if e.cfg.consumers < 1 {
		return nil, errors.New("processor: --consumers must be at least 1")
	}
	if e.cfg.processor.steady {
		if e.cfg.producers < 1 {
			return nil, errors.New("processor --steady: --producers must be at least 1")
		}
		return benchProcessorSteady(ctx, e, q)
	}
	if e.cfg.messages < 1 {
		return nil, errors.New("processor: --messages must be at least 1")
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
	var calls callCounter
	defer calls.observe(e, q)()
	procs, err := e.processors(q, h)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := startAll(ctx, procs); err != nil {
		return nil, err
	}
	e.drainRun(ctx, first, done)
	elapsed := time.Since(start)
	count := handled.Load()
	if err := stopAll(ctx, procs); err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Consumers, r.Batch = e.cfg.consumers, e.cfg.leaseBatch
	r.Note = "backlog; p50/p99: enqueue to handler, the backlog's wait included" + e.prefetchNote() + calls.note()
	return []benchResult{r}, nil
}

// benchProcessorSteady is benchProcessor with --steady: --producers send
// while the processors drain.
func benchProcessorSteady(ctx context.Context, e *benchEnv, q string) ([]benchResult, error) {
	drop, err := e.createQueue(ctx, q)
	if err != nil {
		return nil, err
	}
	defer drop()
	epoch := time.Now()
	var (
		lat     latencies
		handled atomic.Int64
		sent    atomic.Int64
	)
	h := func(_ context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
		if len(m.Body) >= 8 {
			lat.add(time.Since(epoch) - time.Duration(binary.BigEndian.Uint64(m.Body)))
		}
		handled.Add(1)
		return nil
	}
	var calls callCounter
	defer calls.observe(e, q)()
	procs, err := e.processors(q, h)
	if err != nil {
		return nil, err
	}
	if err := startAll(ctx, procs); err != nil {
		return nil, err
	}
	s, err := e.client.NewSender(q)
	if err != nil {
		return nil, err
	}
	var interval time.Duration
	if e.cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(e.cfg.producers) / float64(e.cfg.rate))
	}
	body := payload(max(e.cfg.size, 8))
	runCtx, stopRun := context.WithTimeout(ctx, e.cfg.duration)
	defer stopRun()
	var (
		wg     sync.WaitGroup
		failed firstError
	)
	start := time.Now()
	for range e.cfg.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for runCtx.Err() == nil {
				if interval > 0 {
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						select {
						case <-runCtx.Done():
							return
						case <-time.After(d):
						}
					}
				}
				p := slices.Clone(body)
				binary.BigEndian.PutUint64(p, uint64(time.Since(epoch)))
				if _, err := s.Send(context.WithoutCancel(runCtx), &sluice.Message{Body: p}); err != nil {
					failed.set(err)
					return
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	// What was sent is handled before the clock stops: the rate is that
	// of messages through the processors, not of sends.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for handled.Load() < sent.Load() && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}()
	select {
	case <-drained:
	case <-time.After(e.cfg.duration):
	case <-ctx.Done():
	}
	// Never end before the first delivery (a loaded machine).
	for handled.Load() == 0 && sent.Load() > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	count := handled.Load()
	if err := stopAll(ctx, procs); err != nil {
		return nil, err
	}
	<-drained
	if err := failed.get(); err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Producers, r.Consumers, r.Batch, r.Rate = e.cfg.producers, e.cfg.consumers, e.cfg.leaseBatch, e.cfg.rate
	r.Note = "steady: producers send while the processors drain; p50/p99: send to handler" + e.prefetchNote() + calls.note()
	return []benchResult{r}, nil
}

// callCounter counts the receive and complete calls of the processors
// of a queue and their messages, through ObserveMessages, so that a
// result says how many messages a call carried: the figure that sets the
// rate when each call is a commit (or a round trip), whatever the load of
// the machine.
type callCounter struct {
	receives, received   atomic.Int64
	completes, completed atomic.Int64
}

// observe counts e's calls on q until the returned stop.
func (cc *callCounter) observe(e *benchEnv, q string) (stop func()) {
	return e.client.ObserveMessages(func(ev sluice.MessageEvent) {
		if ev.Entity != q {
			return
		}
		switch {
		case ev.Kind == sluice.MessagesReceived:
			cc.receives.Add(1)
			cc.received.Add(int64(ev.Count))
		case ev.Kind == sluice.MessagesSettled && ev.Action == sluice.SettleComplete:
			cc.completes.Add(1)
			cc.completed.Add(int64(ev.Count))
		}
	})
}

// note says how many messages a receive and a complete carried.
func (cc *callCounter) note() string {
	per := func(n, calls int64) string {
		if calls == 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(n)/float64(calls), 'f', 1, 64)
	}
	return "; messages a receive " + per(cc.received.Load(), cc.receives.Load()) +
		", a complete " + per(cc.completed.Load(), cc.completes.Load())
}

// processors returns --consumers processors of q running h.
func (e *benchEnv) processors(q string, h sluice.Handler) ([]*sluice.Processor, error) {
	procs := make([]*sluice.Processor, e.cfg.consumers)
	opts := &sluice.ProcessorOptions{MaxConcurrent: e.cfg.leaseBatch, PrefetchCount: e.cfg.processor.prefetch}
	for i := range procs {
		p, err := e.client.NewProcessor(q, h, opts)
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	return procs, nil
}

// drainRun waits while a run drains a backlog: until done (all drained),
// --duration or ctx's end, but never before first (the first delivery):
// on a loaded machine a short run could otherwise measure nothing.
func (e *benchEnv) drainRun(ctx context.Context, first, done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(e.cfg.duration):
	case <-ctx.Done():
	}
	select {
	case <-first:
	case <-ctx.Done():
	}
}

// prefetchNote names the prefetch count in a result's note, when set.
func (e *benchEnv) prefetchNote() string {
	if e.cfg.processor.prefetch == 0 {
		return ""
	}
	return "; prefetch " + strconv.Itoa(e.cfg.processor.prefetch)
}

// startAll starts procs.
func startAll(ctx context.Context, procs []*sluice.Processor) error {
	for _, p := range procs {
		if err := p.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stopAll stops procs, waiting for their handlers.
func stopAll(ctx context.Context, procs []*sluice.Processor) error {
	for _, p := range procs {
		if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	return nil
}
