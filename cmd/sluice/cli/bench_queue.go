package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

// benchSessionAccept times accepting the next free session (and
// releasing it) on a queue of cfg.sessions sessions, each holding one
// message, with none locked and then with cfg.locked of them locked.
func benchSessionAccept(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	if e.cfg.locked >= e.cfg.sessions {
		return nil, fmt.Errorf("session-accept: --locked %d leaves no free session among --sessions %d", e.cfg.locked, e.cfg.sessions)
	}
	return e.levels(ctx, "bench-sessions", store.QueueSettings{RequiresSession: true}, []int{0, e.cfg.locked}, e.sessionAcceptLevel)
}

func (e *benchEnv) sessionAcceptLevel(ctx context.Context, q string, locked int) (benchResult, error) {
	const accepts = 300
	body := payload(e.cfg.size)
	for sent := 0; sent < e.cfg.sessions; {
		k := min(e.cfg.sessions-sent, 500)
		msgs := make([]store.NewMessage, k)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: body, SessionID: fmt.Sprintf("session-%06d", sent+i)}
		}
		if _, err := e.store.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs}); err != nil {
			return benchResult{}, err
		}
		sent += k
	}
	// Lock the sessions from the end, so that the free ones are the first.
	for i := range locked {
		id := fmt.Sprintf("session-%06d", e.cfg.sessions-1-i)
		if _, err := e.store.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, SessionID: id, Duration: time.Hour}); err != nil {
			return benchResult{}, err
		}
	}
	var lat latencies
	start := time.Now()
	for range accepts {
		t0 := time.Now()
		l, err := e.store.AcceptSession(ctx, &store.AcceptSessionParams{Queue: q, Duration: time.Minute})
		if err != nil {
			return benchResult{}, fmt.Errorf("session-accept: %w", err)
		}
		lat.add(time.Since(t0))
		if err := e.store.ReleaseSession(ctx, &store.SessionParams{Queue: q, SessionID: l.SessionID, Token: l.Token}); err != nil {
			return benchResult{}, err
		}
	}
	r := result(accepts, time.Since(start), &lat)
	r.Locked = &locked
	r.Note = fmt.Sprintf("p50/p99: one accept of the next free session of %d", e.cfg.sessions)
	return r, nil
}

// benchReceiveAmongScheduled times leases of 32 with no other messages,
// then with cfg.scheduled messages present that a lease must pass over:
// half scheduled for later, half deferred.
func benchReceiveAmongScheduled(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	return e.levels(ctx, "bench-scheduled", store.QueueSettings{}, []int{0, e.cfg.scheduled}, e.scheduledLevel)
}

func (e *benchEnv) scheduledLevel(ctx context.Context, q string, n int) (benchResult, error) {
	body := payload(e.cfg.size)
	later := time.Now().Add(24 * time.Hour)
	for sent := 0; sent < n/2; {
		k := min(n/2-sent, 500)
		msgs := make([]store.NewMessage, k)
		for i := range msgs {
			msgs[i] = store.NewMessage{Payload: body, VisibleAt: later}
		}
		if _, err := e.store.Enqueue(ctx, &store.EnqueueParams{Queue: q, Messages: msgs}); err != nil {
			return benchResult{}, err
		}
		sent += k
	}
	// Deferred: enqueued, leased and deferred.
	if err := e.preload(ctx, q, n-n/2); err != nil {
		return benchResult{}, err
	}
	for deferred := 0; deferred < n-n/2; {
		got, err := e.store.Lease(ctx, &store.LeaseParams{Queue: q, Max: min(1000, n-n/2-deferred), Visibility: time.Hour})
		if err != nil {
			return benchResult{}, err
		}
		if len(got) == 0 {
			return benchResult{}, fmt.Errorf("receive-among-scheduled: only %d messages could be deferred", deferred)
		}
		p := &store.SettleParams{Queue: q, Action: store.Defer}
		for _, l := range got {
			p.Receipts = append(p.Receipts, l.Receipt)
		}
		if _, err := e.store.Settle(ctx, p); err != nil {
			return benchResult{}, err
		}
		deferred += len(got)
	}
	r, err := e.timeLeases(ctx, "receive-among-scheduled", q)
	r.Scheduled = &n
	return r, err
}

// benchTopicFanout measures sends through the queue API: to a plain
// queue, then to a topic whose cfg.subs subscriptions each take every
// message (one row per copy, all in one transaction).
func benchTopicFanout(ctx context.Context, e *benchEnv) ([]benchResult, error) {
	c := e.client
	const queue, topic = "bench-fanout-queue", "bench-fanout-topic"
	if _, err := c.CreateQueue(ctx, queue, nil); err != nil {
		return nil, err
	}
	defer c.DeleteQueue(context.WithoutCancel(ctx), queue)
	if _, err := c.CreateTopic(ctx, topic, nil); err != nil {
		return nil, err
	}
	defer c.DeleteTopic(context.WithoutCancel(ctx), topic)
	for i := range e.cfg.subs {
		if _, err := c.CreateSubscription(ctx, topic, fmt.Sprintf("s%02d", i), nil); err != nil {
			return nil, err
		}
	}
	var out []benchResult
	for _, level := range []struct {
		entity string
		subs   int
	}{{queue, 0}, {topic, e.cfg.subs}} {
		s, err := c.NewSender(level.entity)
		if err != nil {
			return nil, err
		}
		body := payload(e.cfg.size)
		var lat latencies
		count, elapsed, err := timed(ctx, e.cfg.producers, e.cfg.duration, func(ctx context.Context, _ int) (int, error) {
			msgs := make([]*sluice.Message, e.cfg.batch)
			for i := range msgs {
				msgs[i] = &sluice.Message{Body: body}
			}
			start := time.Now()
			if _, err := s.SendBatch(ctx, msgs); err != nil {
				return 0, err
			}
			lat.add(time.Since(start))
			return len(msgs), nil
		})
		if err != nil {
			return nil, err
		}
		r := result(count, elapsed, &lat)
		r.Producers, r.Batch, r.Subs = e.cfg.producers, e.cfg.batch, &level.subs
		r.Note = "msgs/s: messages sent (each copied to every subscription)"
		out = append(out, r)
	}
	return out, nil
}
