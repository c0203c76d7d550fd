package cli

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// benchSessionProcessor measures one SessionProcessor draining --messages
// pre-loaded messages spread over --sessions sessions (message i to
// session i mod --sessions): --consumers sessions held at once
// (MaxConcurrentSessions), one handler a session (so in order) that does
// nothing, and --prefetch prefetched messages a session, so that a session
// is received in batches of 1 + --prefetch. The latency runs from enqueue
// to handler, the backlog's wait included.
func benchSessionProcessor(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	const q = "bench-session-processor"
	switch {
	case e.cfg.messages < 1:
		return nil, errors.New("session-processor: --messages must be at least 1")
	case e.cfg.sessions < 1:
		return nil, errors.New("session-processor: --sessions must be at least 1")
	case e.cfg.consumers < 1:
		return nil, errors.New("session-processor: --consumers must be at least 1")
	}
	if _, err := e.client.CreateQueue(ctx, q, &sluice.QueueProperties{RequiresSession: true}); err != nil {
		return nil, err
	}
	defer func() { _ = e.client.DeleteQueue(context.WithoutCancel(ctx), q) }()
	body := payload(e.cfg.size)
	for sent := 0; sent < e.cfg.messages; {
		k := min(e.cfg.messages-sent, 500)
		msgs := make([]store.NewMessage, k)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: body, SessionID: fmt.Sprintf("session-%06d", (sent+i)%e.cfg.sessions)}
		}
		if _, err := e.store.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs}); err != nil {
			return nil, err
		}
		sent += k
	}
	var (
		lat     latencies
		handled atomic.Int64
		first   = make(chan struct{})
		done    = make(chan struct{})
	)
	h := func(_ context.Context, _ sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
		lat.add(time.Since(m.EnqueuedTime))
		switch handled.Add(1) {
		case 1:
			close(first)
			if e.cfg.messages == 1 {
				close(done)
			}
		case int64(e.cfg.messages):
			close(done)
		}
		return nil
	}
	var calls callCounter
	defer calls.observe(e, q)()
	p, err := e.client.NewSessionProcessor(q, h, &sluice.SessionProcessorOptions{
		MaxConcurrentSessions: e.cfg.consumers, PrefetchCount: e.cfg.processor.prefetch,
		// A drained session goes back quickly, for the next one.
		SessionIdleTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	e.drainRun(ctx, first, done)
	elapsed := time.Since(start)
	count := handled.Load()
	if err := p.Stop(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	r := result(count, elapsed, &lat)
	r.Consumers = e.cfg.consumers
	r.Note = fmt.Sprintf("backlog of %d sessions; p50/p99: enqueue to handler, the backlog's wait included", e.cfg.sessions) + e.prefetchNote() + calls.note()
	return []benchResult{r}, nil
}
