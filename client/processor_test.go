package client_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testdb"
)

// forEachRemote runs f, in parallel, on every backend with a network
// client of a server in front of a fresh tenant of it.
func forEachRemote(t *testing.T, f func(t *testing.T, c *client.Client)) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			_, remote := libraryAndRemote(t, kind)
			f(t, remote)
		})
	}
}

// waitFor polls cond for up to a minute (the machine may be loaded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errorLog collects what a processor reports to OnError.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// queueWith creates a queue with props and sends it a message per body.
func queueWith(t *testing.T, c *client.Client, name string, props *sluice.QueueProperties, bodies ...string) {
	t.Helper()
	if _, err := c.CreateQueue(t.Context(), name, props); err != nil {
		t.Fatal(err)
	}
	if len(bodies) == 0 {
		return
	}
	msgs := make([]*sluice.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = &sluice.Message{Body: []byte(b)}
	}
	s, err := c.NewSender(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
}

// startRemote makes and starts a processor of the network client.
func startRemote(t *testing.T, c *client.Client, queue string, h sluice.MessageHandler, opts *sluice.ProcessorOptions) *sluice.Processor {
	t.Helper()
	p, err := c.NewProcessor(queue, h, opts)
	if err != nil {
		t.Fatalf("NewProcessor: %v", err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return p
}

// stopRemote stops p, waiting for its handlers.
func stopRemote(t *testing.T, p *sluice.Processor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// statsOf returns the queue's counts.
func statsOf(t *testing.T, c *client.Client, queue string) sluice.QueueStats {
	t.Helper()
	st, err := c.GetQueueStats(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Through a server, the processor runs handlers up to its bound and
// completes what they return nil for; a message the handler dead-lettered
// itself is left alone (no complete after it, so no error either).
func TestRemoteProcessor(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		const n = 20
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = strconv.Itoa(i)
		}
		queueWith(t, c, "work", nil, bodies...)
		var (
			running, peak, handled atomic.Int64
			errs                   errorLog
		)
		p := startRemote(t, c, "work", func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			cur := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
			}
			defer handled.Add(1)
			if string(m.Body) == "13" {
				return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "thirteen"})
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 4, OnError: errs.add})
		waitFor(t, "every message handled", func() bool { return handled.Load() == n })
		stopRemote(t, p)
		if got := peak.Load(); got > 4 {
			t.Errorf("peak concurrency %d, above the bound 4", got)
		}
		if st := statsOf(t, c, "work"); st.Active+st.InFlight != 0 || st.DeadLettered != 1 {
			t.Errorf("stats after processing: %+v, want empty with one dead letter", st)
		}
		if errs := errs.all(); len(errs) != 0 {
			t.Errorf("errors reported: %v, want none (the dead-lettered message left alone)", errs)
		}
	})
}

// A failing handler's message comes back after the retry policy's delay,
// and is dead-lettered on its last allowed delivery.
func TestRemoteProcessorRetry(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		queueWith(t, c, "flaky", &sluice.QueueProperties{MaxDeliveryCount: 3}, "m")
		const delay = 400 * time.Millisecond
		var (
			mu    sync.Mutex
			times []time.Time
			count []int
		)
		p := startRemote(t, c, "flaky", func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			defer mu.Unlock()
			times, count = append(times, time.Now()), append(count, m.DeliveryCount)
			return errors.New("always fails")
		}, &sluice.ProcessorOptions{
			Retry:   sluice.RetryFunc(func(int, error) time.Duration { return delay }),
			OnError: func(error) {},
		})
		waitFor(t, "the message dead-lettered", func() bool { return statsOf(t, c, "flaky").DeadLettered == 1 })
		stopRemote(t, p)
		mu.Lock()
		defer mu.Unlock()
		if len(count) != 3 || count[0] != 1 || count[1] != 2 || count[2] != 3 {
			t.Fatalf("delivery counts %v, want [1 2 3]", count)
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < delay-50*time.Millisecond {
				t.Errorf("delivery %d came %v after the one before, want at least the retry delay %v", i+1, gap, delay)
			}
		}
		reasons, err := c.DeadLetterReasons(t.Context(), "flaky")
		if err != nil || len(reasons) != 1 {
			t.Errorf("dead-letter reasons %v, %v: want one", reasons, err)
		}
	})
}

// The processor renews the lock of a handler that runs longer than the
// queue's lock duration, through the server: the message is delivered
// once, the handler's context stays alive, and it is completed.
func TestRemoteProcessorRenewsLock(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		queueWith(t, c, "slow", &sluice.QueueProperties{LockDuration: 2 * time.Second}, "slow")
		info, err := c.GetQueue(t.Context(), "slow")
		if err != nil {
			t.Fatal(err)
		}
		hold := 2*info.LockDuration + info.LockDuration/2
		var calls, finished atomic.Int64
		var handlerErr atomic.Value
		p := startRemote(t, c, "slow", func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			calls.Add(1)
			defer finished.Add(1)
			select {
			case <-time.After(hold):
				return nil
			case <-ctx.Done():
				handlerErr.Store(context.Cause(ctx))
				return context.Cause(ctx)
			}
		}, &sluice.ProcessorOptions{MaxConcurrent: 2, OnError: func(error) {}})
		waitFor(t, "the slow handler", func() bool { return finished.Load() == 1 })
		stopRemote(t, p)
		if err, _ := handlerErr.Load().(error); err != nil {
			t.Fatalf("the handler's context ended: %v", err)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler called %d times, want once: the lock was not renewed", calls.Load())
		}
		if st := statsOf(t, c, "slow"); st.Active+st.InFlight+st.DeadLettered != 0 {
			t.Fatalf("stats: %+v, want the message completed", st)
		}
	})
}

// Stop waits for a running handler and its complete; when Stop's context
// ends first, the handler's context ends, and its message goes back.
func TestRemoteProcessorStop(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		queueWith(t, c, "graceful", nil, "m")
		started, release := make(chan struct{}), make(chan struct{})
		var returned atomic.Bool
		p := startRemote(t, c, "graceful", func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			close(started)
			<-release
			returned.Store(true)
			return nil
		}, nil)
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- p.Stop(t.Context()) }()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while a handler ran", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if !returned.Load() {
			t.Fatal("Stop returned before the handler")
		}
		if st := statsOf(t, c, "graceful"); st.Active+st.InFlight != 0 {
			t.Fatalf("stats after a graceful stop: %+v, want the message completed", st)
		}

		queueWith(t, c, "forced", nil, "stuck")
		forcedStarted := make(chan struct{})
		var ended atomic.Bool
		p = startRemote(t, c, "forced", func(ctx context.Context, r sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			close(forcedStarted)
			<-ctx.Done()
			ended.Store(true)
			return ctx.Err()
		}, nil)
		<-forcedStarted
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with a handler that does not return: %v, want DeadlineExceeded", err)
		}
		if !ended.Load() {
			t.Fatal("Stop returned before the handler's context ended and it returned")
		}
		r, err := c.NewReceiver("forced", nil)
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(t.Context(), time.Minute)
		defer rcancel()
		ms, err := r.Receive(rctx, 1)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != "stuck" {
			t.Fatalf("receive after a forced stop: %v, %v; want the message back", ms, err)
		}
	})
}

// NewProcessor and MessageProcessor refuse what the library's refuses,
// and the library's Middleware, which takes its *sluice.Receiver.
func TestRemoteProcessorChecks(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, sluice.MessageReceiver, *sluice.ReceivedMessage) error { return nil }
	for name, f := range map[string]func() (*sluice.Processor, error){
		"empty queue": func() (*sluice.Processor, error) { return c.NewProcessor("", h, nil) },
		"nil handler": func() (*sluice.Processor, error) { return c.MessageProcessor("q", nil, nil) },
		"max concurrent": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{MaxConcurrent: -1})
		},
		"negative prefetch": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{PrefetchCount: -1})
		},
		"prefetch past the batch limit": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{MaxConcurrent: 10, PrefetchCount: 991})
		},
		"bad retry": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{Retry: sluice.ExponentialBackoff{Initial: -1}})
		},
		"library's": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{Middleware: []sluice.Middleware{sluice.Recover()}})
		},
		"nil message mw": func() (*sluice.Processor, error) {
			return c.NewProcessor("q", h, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{nil}})
		},
	} {
		if p, err := f(); p != nil || err == nil || (!errors.Is(err, sluice.ErrInvalidArgument) && !errors.Is(err, sluice.ErrInvalidName)) {
			t.Errorf("%s: %v, %v; want ErrInvalidArgument", name, p, err)
		}
	}
	if p, err := c.NewProcessor("q", h, &sluice.ProcessorOptions{MaxConcurrent: 10, PrefetchCount: 990}); err != nil || p == nil {
		t.Errorf("NewProcessor with the largest budget: %v, %v", p, err)
	}
	p, err := c.NewProcessor("q", h, &sluice.ProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{sluice.TimeoutMessage(time.Second), sluice.LoggingMessage(nil)}})
	if err != nil || p == nil {
		t.Errorf("NewProcessor with message middleware: %v, %v", p, err)
	}
}

// remoteCounter counts the Receive and CompleteBatch calls a processor
// makes through the network client, and their messages.
type remoteCounter struct {
	sluice.MessageReceiver
	receives, received   atomic.Int64
	completes, completed atomic.Int64
}

func (r *remoteCounter) Receive(ctx context.Context, max int) ([]*sluice.ReceivedMessage, error) {
	ms, err := r.MessageReceiver.Receive(ctx, max)
	r.receives.Add(1)
	r.received.Add(int64(len(ms)))
	return ms, err
}

func (r *remoteCounter) CompleteBatch(ctx context.Context, msgs []*sluice.ReceivedMessage) error {
	r.completes.Add(1)
	r.completed.Add(int64(len(msgs)))
	return r.MessageReceiver.CompleteBatch(ctx, msgs)
}

// Through a server, a processor with a prefetch budget receives and
// completes in batches (one call each for many messages), handles every
// message once, and a prefetched message waiting longer than its lock is
// renewed, not delivered again.
func TestRemoteProcessorPrefetch(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		const n = 120
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = strconv.Itoa(i)
		}
		// Renewals go through the server: a lock of a few seconds leaves
		// them room on a loaded machine (a 1 s lock lost its renewals in
		// CI, 500 ms late).
		const lock = 4 * time.Second
		queueWith(t, c, "prefetched", &sluice.QueueProperties{LockDuration: lock}, bodies...)
		r, err := c.NewReceiver("prefetched", nil)
		if err != nil {
			t.Fatal(err)
		}
		counted := &remoteCounter{MessageReceiver: r}
		var (
			mu      sync.Mutex
			seen    = map[string][]int{}
			expired atomic.Int64
			errs    errorLog
		)
		p, err := sluice.NewMessageProcessor(counted, func(ctx context.Context, _ sluice.MessageReceiver, m *sluice.ReceivedMessage) error {
			if time.Until(m.LockedUntil) <= 0 {
				expired.Add(1)
			}
			mu.Lock()
			seen[string(m.Body)] = append(seen[string(m.Body)], m.DeliveryCount)
			mu.Unlock()
			if string(m.Body) == "0" {
				time.Sleep(3 * lock / 2) // the prefetched wait beyond their lock
			}
			return nil
		}, &sluice.ProcessorOptions{MaxConcurrent: 2, PrefetchCount: 14, OnError: errs.add})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every message handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == n
		})
		waitFor(t, "the queue empty", func() bool { st := statsOf(t, c, "prefetched"); return st.Active+st.InFlight == 0 })
		stopRemote(t, p)
		mu.Lock()
		defer mu.Unlock()
		for body, counts := range seen {
			if len(counts) != 1 || counts[0] != 1 {
				t.Errorf("message %s delivered with counts %v, want once", body, counts)
			}
		}
		if expired.Load() != 0 {
			t.Errorf("%d messages handed out with their lock ended", expired.Load())
		}
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
