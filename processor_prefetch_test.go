package sluice_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// countingReceiver counts the Receive calls of a processor and the
// messages they returned, and the CompleteBatch calls and their messages.
type countingReceiver struct {
	sluice.MessageReceiver
	receives, received   atomic.Int64
	completes, completed atomic.Int64
	abandons             atomic.Int64
}

func (r *countingReceiver) Abandon(ctx context.Context, m *sluice.ReceivedMessage, opts *sluice.AbandonOptions) error {
	r.abandons.Add(1)
	return r.MessageReceiver.Abandon(ctx, m, opts)
}

func (r *countingReceiver) Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	ms, err := r.MessageReceiver.Receive(ctx, max)
	r.receives.Add(1)
	r.received.Add(int64(len(ms)))
	return ms, err
}

func (r *countingReceiver) CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	r.completes.Add(1)
	r.completed.Add(int64(len(msgs)))
	return r.MessageReceiver.CompleteBatch(ctx, msgs)
}

// handlings records, per body, the delivery counts a handler saw.
type handlings struct {
	mu  sync.Mutex
	got map[string][]int
}

func (d *handlings) add(m *sluice.ReceivedMessage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.got == nil {
		d.got = map[string][]int{}
	}
	d.got[string(m.Body)] = append(d.got[string(m.Body)], m.DeliveryCount)
}

func (d *handlings) snapshot() map[string][]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]int, len(d.got))
	for k, v := range d.got {
		out[k] = append([]int(nil), v...)
	}
	return out
}

func (d *handlings) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// With a prefetch budget, every message is handled once, in batches of
// receives and completes, and none is left.
func TestProcessorPrefetch(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		const n = 300
		msgs := make([]*sluice.Message, n)
		for i := range msgs {
			msgs[i] = &sluice.Message{Body: []byte(strconv.Itoa(i))}
		}
		if _, err := newSender(t, c, q).SendBatch(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		counted := &countingReceiver{MessageReceiver: r}
		var (
			seen             handlings
			running, peak    atomic.Int64
			errs             errorLog
			handled          atomic.Int64
			lockedAtHandOut  atomic.Int64
			deadLockHandOuts atomic.Int64
		)
		p := startMessageProcessor(t, counted, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			cur := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
			}
			if time.Until(m.LockedUntil) > 0 {
				lockedAtHandOut.Add(1)
			} else {
				deadLockHandOuts.Add(1)
			}
			seen.add(m)
			handled.Add(1)
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 4, PrefetchCount: 28, OnError: errs.add})
		waitUntil(t, "every message handled", func() bool { return seen.count() == n })
		waitEmpty(t, c, q)
		stop(t, p)
		for body, counts := range seen.snapshot() {
			if len(counts) != 1 || counts[0] != 1 {
				t.Errorf("message %s delivered with counts %v, want once", body, counts)
			}
		}
		if got := peak.Load(); got > 4 {
			t.Errorf("peak concurrency %d, above the bound 4", got)
		}
		if deadLockHandOuts.Load() != 0 {
			t.Errorf("%d messages handed out with their lock ended", deadLockHandOuts.Load())
		}
		// A receive asks for everything missing from the budget of 32 once
		// half of it is free, so that 300 messages take far fewer than 300
		// receives; the same for completes.
		if rc, got := counted.receives.Load(), counted.received.Load(); rc*4 > got {
			t.Errorf("%d receives for %d messages: want at least 4 a receive on average", rc, got)
		}
		if cc, got := counted.completes.Load(), counted.completed.Load(); got != n || cc*2 > got {
			t.Errorf("%d complete batches of %d messages in all: want %d, at least 2 a batch on average", cc, got, n)
		}
		if errs := errs.all(); len(errs) != 0 {
			t.Errorf("errors reported: %v", errs)
		}
	})
}

// In steady state, producers sending while the processor drains and slots
// freeing one at a time, a receive still takes several messages: fewer
// receive calls than messages.
func TestProcessorSteadyStateReceivesInBatches(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, nil)
		r := newReceiver(t, c, q, sluice.PeekLock)
		counted := &countingReceiver{MessageReceiver: r}
		const n = 240
		var handled atomic.Int64
		p := startMessageProcessor(t, counted, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			// Handlers of different lengths free their slots one at a time.
			time.Sleep(time.Duration(5+rand.IntN(36)) * time.Millisecond)
			handled.Add(1)
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 8})
		// The producer keeps a few batches' worth waiting, never all n.
		s := newSender(t, c, q)
		sent := 0
		for sent < n {
			if int64(sent)-handled.Load() >= 24 {
				time.Sleep(time.Millisecond)
				continue
			}
			batch := make([]*sluice.Message, 8)
			for i := range batch {
				batch[i] = &sluice.Message{Body: []byte(strconv.Itoa(sent + i))}
			}
			if _, err := s.SendBatch(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
			sent += len(batch)
		}
		waitUntil(t, "every message handled", func() bool { return handled.Load() == n })
		stop(t, p)
		// One slot free at a time would mean little more than one message
		// a receive; the processor waits for half of its 8 slots.
		if rc, got := counted.receives.Load(), counted.received.Load(); rc*3 > got {
			t.Errorf("%d receives for %d messages: want at least 3 a receive on average", rc, got)
		}
	})
}

// A prefetched message's lock runs while it waits: the processor renews
// it, so that a message that waited longer than the lock duration behind
// a slow handler is handled once, with its lock held, neither released
// nor abandoned. (Through a receiver other than the library's, as here,
// a message let go is abandoned, which the counter sees.)
func TestProcessorPrefetchRenewsWaiting(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const lock = 3 * time.Second // renewals at half of it: room on a loaded machine
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: lock})
		send(t, newSender(t, c, q), "slow", "b", "c")
		counted := &countingReceiver{MessageReceiver: newReceiver(t, c, q, sluice.PeekLock)}
		var (
			seen    handlings
			expired atomic.Int64
		)
		p := startMessageProcessor(t, counted, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			if time.Until(m.LockedUntil) <= 0 {
				expired.Add(1)
			}
			seen.add(m)
			if string(m.Body) == "slow" {
				// Twice and a half the lock: the others wait that long.
				select {
				case <-time.After(5 * lock / 2):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 1, PrefetchCount: 2})
		waitUntil(t, "every message handled", func() bool { return seen.count() == 3 })
		waitEmpty(t, c, q)
		stop(t, p)
		for body, counts := range seen.snapshot() {
			if len(counts) != 1 || counts[0] != 1 {
				t.Errorf("message %s delivered with counts %v, want once: its lock was not renewed while it waited", body, counts)
			}
		}
		if expired.Load() != 0 {
			t.Errorf("%d messages handed out with their lock ended", expired.Load())
		}
		if n := counted.abandons.Load(); n != 0 {
			t.Errorf("%d messages let go while they waited, want none (renewed)", n)
		}
		if n := counted.received.Load(); n != 3 {
			t.Errorf("%d messages received, want 3 (each once)", n)
		}
	})
}

// Without renewal, a prefetched message is released before its lock
// ends, without counting a delivery, and is never handed out with a dead
// lock.
func TestProcessorPrefetchReleasesWaiting(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const lock = time.Second
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: lock})
		send(t, newSender(t, c, q), "slow", "b", "c")
		var (
			seen    handlings
			expired atomic.Int64
			errs    errorLog
		)
		p := startProcessor(t, c, q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			if time.Until(m.LockedUntil) <= 0 {
				expired.Add(1)
			}
			seen.add(m)
			if string(m.Body) == "slow" && m.DeliveryCount == 1 {
				time.Sleep(3 * lock / 2) // its lock ends: it comes again
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 1, PrefetchCount: 2, MaxAutoLockRenewal: -1, OnError: errs.add})
		waitUntil(t, "every message handled", func() bool {
			got := seen.snapshot()
			return len(got["slow"]) == 2 && len(got["b"]) == 1 && len(got["c"]) == 1
		})
		waitEmpty(t, c, q)
		stop(t, p)
		got := seen.snapshot()
		for _, body := range []string{"b", "c"} {
			if counts := got[body]; len(counts) != 1 || counts[0] != 1 {
				t.Errorf("message %s delivered with counts %v, want once with count 1: released, not abandoned or expired", body, counts)
			}
		}
		if counts := got["slow"]; counts[0] != 1 || counts[1] != 2 {
			t.Errorf("the slow message's delivery counts %v, want [1 2]: its lock ended under its handler", counts)
		}
		if expired.Load() != 0 {
			t.Errorf("%d messages handed out with their lock ended", expired.Load())
		}
		// The slow message's complete failed: a lost lock, reported.
		lost := 0
		for _, err := range errs.all() {
			if errors.Is(err, sluice.ErrLockLost) {
				lost++
			}
		}
		if lost != 1 {
			t.Errorf("errors reported: %v; want one lost lock (the slow message's)", errs.all())
		}
	})
}

// Stop releases the prefetched messages without counting a delivery.
func TestProcessorStopReleasesPrefetched(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		// One delivery allowed: a release that counted one would
		// dead-letter the message.
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 1})
		send(t, newSender(t, c, q), "stuck", "b", "c", "d", "e")
		started := make(chan struct{})
		p := startProcessor(t, c, q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			close(started) // a second call would panic: one handler runs
			<-ctx.Done()
			return ctx.Err()
		}, &sluice.ProcessorOptions{MaxConcurrent: 1, PrefetchCount: 4})
		<-started
		waitUntil(t, "all five held", func() bool {
			st, err := c.GetQueueStats(t.Context(), q)
			return err == nil && st.InFlight == 5
		})
		sctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		wantErr(t, "Stop with a handler that does not return", p.Stop(sctx), context.DeadlineExceeded)
		r := newReceiver(t, c, q, sluice.PeekLock)
		var got []*sluice.ReceivedMessage
		for len(got) < 5 {
			got = append(got, receive(t, r, 5-len(got))...)
		}
		for _, m := range got {
			if m.DeliveryCount != 1 {
				t.Errorf("message %s after Stop came with delivery count %d, want 1 (released)", m.Body, m.DeliveryCount)
			}
		}
		if reasons, err := c.DeadLetterReasons(t.Context(), q); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters after Stop: %v, %v", reasons, err)
		}
	})
}

// A completion that fails (the message's lock ended while its handler
// ran) is reported to OnError for that message alone; the message whose
// handler returned beside it is completed.
func TestProcessorBatchedCompleteFailures(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const lock = 2 * time.Second
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: lock})
		seqs := send(t, newSender(t, c, q), "late", "kept")
		var (
			seen handlings
			errs errorLog
		)
		lateDone := make(chan struct{})
		p := startProcessor(t, c, q, func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			seen.add(m)
			switch {
			case m.DeliveryCount > 1:
			case string(m.Body) == "late":
				time.Sleep(lock + lock/4) // its lock ends, and no one renews it
				close(lateDone)
			default:
				// Renews its own lock until the late one returns, to return
				// beside it with a lock that holds.
				tick := time.NewTicker(lock / 5)
				defer tick.Stop()
				for {
					select {
					case <-lateDone:
						return nil
					case <-tick.C:
						if err := r.RenewLock(ctx, m); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 2, MaxAutoLockRenewal: -1, OnError: errs.add})
		waitUntil(t, "the late message again", func() bool { return len(seen.snapshot()["late"]) == 2 })
		waitEmpty(t, c, q)
		stop(t, p)
		if got := seen.snapshot()["kept"]; len(got) != 1 {
			t.Errorf("the kept message delivered %d times, want once (completed beside the failure)", len(got))
		}
		all := errs.all()
		if len(all) != 1 || !errors.Is(all[0], sluice.ErrLockLost) || !strings.Contains(all[0].Error(), "message "+strconv.FormatInt(seqs[0], 10)) {
			t.Fatalf("errors reported: %v; want one lost lock, of message %d", all, seqs[0])
		}
	})
}

// slowCompleter holds a processor's first CompleteBatch until every lock
// it completes, as the batch came, has ended.
type slowCompleter struct {
	sluice.MessageReceiver
	calls atomic.Int64
}

func (r *slowCompleter) CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	if r.calls.Add(1) == 1 {
		var last time.Time
		for _, m := range msgs {
			if m.LockedUntil.After(last) {
				last = m.LockedUntil
			}
		}
		select {
		case <-time.After(time.Until(last) + 100*time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.MessageReceiver.CompleteBatch(ctx, msgs)
}

// A completion that waits (a slow batch ahead of it, a loaded database)
// does not lose its lock: the processor renews a message's lock until its
// completion commits, not only while its handler runs.
func TestProcessorCompletionKeepsLock(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		const lock = 3 * time.Second // renewals at half of it: room on a loaded machine
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: lock})
		send(t, newSender(t, c, q), "a", "b", "c")
		slow := &slowCompleter{MessageReceiver: newReceiver(t, c, q, sluice.PeekLock)}
		var (
			seen handlings
			errs errorLog
		)
		p := startMessageProcessor(t, slow, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			seen.add(m)
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 1, PrefetchCount: 2, OnError: errs.add})
		waitEmpty(t, c, q)
		stop(t, p)
		for body, counts := range seen.snapshot() {
			if len(counts) != 1 || counts[0] != 1 {
				t.Errorf("message %s delivered with counts %v, want once: its lock ended while its completion waited", body, counts)
			}
		}
		if all := errs.all(); len(all) != 0 {
			t.Errorf("errors reported: %v; want none", all)
		}
	})
}

// startMessageProcessor starts a processor on r.
func startMessageProcessor(t *testing.T, r sluice.MessageReceiver, h sluice.MessageHandler, opts *sluice.ProcessorOptions) *sluice.Processor {
	t.Helper()
	p, err := sluice.NewMessageProcessor(r, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitEmpty waits until queue q holds no message, active or locked.
func waitEmpty(t *testing.T, c *sluice.Client, q string) {
	t.Helper()
	waitUntil(t, "the queue empty", func() bool {
		st, err := c.GetQueueStats(t.Context(), q)
		return err == nil && st.Active+st.InFlight == 0
	})
}

// all returns the errors l holds.
func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// PrefetchCount's edges: 0 is no prefetch, negative is refused, and
// MaxConcurrent+PrefetchCount may reach the batch limit but not pass it.
func TestProcessorPrefetchBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		processorBounds(t, c)
	})
}

func processorBounds(t *testing.T, c *sluice.Client) {
	q := createQueue(t, c, nil)
	h := func(context.Context, *sluice.Receiver, *sluice.ReceivedMessage) error { return nil }
	const limit = 1000 // Options.Limits.MaxBatch's default
	for _, tc := range []struct {
		opts sluice.ProcessorOptions
		ok   bool
	}{
		{sluice.ProcessorOptions{PrefetchCount: 0}, true},
		{sluice.ProcessorOptions{PrefetchCount: -1}, false},
		{sluice.ProcessorOptions{PrefetchCount: limit - 1}, true},
		{sluice.ProcessorOptions{PrefetchCount: limit}, false}, // with MaxConcurrent's default 1
		{sluice.ProcessorOptions{MaxConcurrent: limit, PrefetchCount: 1}, false},
		{sluice.ProcessorOptions{MaxConcurrent: 10, PrefetchCount: limit - 10}, true},
	} {
		p, err := c.NewProcessor(q, h, &tc.opts)
		if tc.ok && (err != nil || p == nil) {
			t.Errorf("NewProcessor(%+v): %v, want it accepted", tc.opts, err)
		}
		if !tc.ok && (p != nil || !errors.Is(err, sluice.ErrInvalidArgument)) {
			t.Errorf("NewProcessor(%+v): %v, %v, want ErrInvalidArgument", tc.opts, p, err)
		}
	}
}

// Receiver.Release hands messages back at once without counting a
// delivery: on a queue that allows one delivery, released messages come
// again with delivery count 1, in sequence order whatever the order of
// the releases; a released message's receipt no longer settles.
func TestReceiverRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 1})
		send(t, newSender(t, c, q), "a", "b", "c")
		r := newReceiver(t, c, q, sluice.PeekLock)
		got := receive(t, r, 3)
		for _, m := range []*sluice.ReceivedMessage{got[2], got[1]} {
			if err := r.Release(t.Context(), m); err != nil {
				t.Fatalf("release %s: %v", m.Body, err)
			}
		}
		wantErr(t, "complete a released message", r.Complete(t.Context(), got[1]), sluice.ErrLockLost)
		again := receive(t, r, 2)
		if string(again[0].Body) != "b" || string(again[1].Body) != "c" || again[0].DeliveryCount != 1 || again[1].DeliveryCount != 1 {
			t.Fatalf("after the releases: %s (delivery %d), %s (delivery %d); want b and c, each on delivery 1",
				again[0].Body, again[0].DeliveryCount, again[1].Body, again[1].DeliveryCount)
		}
		if reasons, err := c.DeadLetterReasons(t.Context(), q); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters after the releases: %v, %v", reasons, err)
		}
	})
}
