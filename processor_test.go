package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// noProcessorLeft fails the test when, after its subtests, a goroutine
// of a processor or receiver is still running.
func noProcessorLeft(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			leaked := strings.Contains(stacks, "sluice.(*Processor)") || strings.Contains(stacks, "sluice.(*SessionProcessor)") || strings.Contains(stacks, "sluice.(*Receiver)")
			if !leaked {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("processor goroutines still running after Stop:\n%s", stacks)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func startProcessor(t *testing.T, c *sluice.Client, q string, h sluice.Handler, opts *sluice.ProcessorOptions) *sluice.Processor {
	t.Helper()
	p, err := c.NewProcessor(q, h, opts)
	if err != nil {
		t.Fatalf("NewProcessor: %v", err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	wantErr(t, "a second Start", p.Start(t.Context()), sluice.ErrInvalidArgument)
	return p
}

func stop(t *testing.T, p *sluice.Processor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// waitUntil polls cond for up to 60 s (a loaded machine is slow).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The processor runs handlers up to its concurrency bound, completes what
// succeeds, abandons what fails or panics (so it comes again), and leaves
// alone what the handler settled itself.
func TestProcessor(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, nil)
		const n = 40
		msgs := make([]*sluice.Message, n)
		for i := range msgs {
			msgs[i] = &sluice.Message{Body: []byte(strconv.Itoa(i))}
		}
		if _, err := newSender(t, c, q).SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var (
			running, peak, handled atomic.Int64
			mu                     sync.Mutex
			done                   = map[string]int{} // body -> delivery count when it succeeded
			errs                   []error
		)
		h := func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
			cur := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
			}
			time.Sleep(15 * time.Millisecond)
			i, _ := strconv.Atoi(string(m.Body))
			switch {
			case i == 13:
				defer handled.Add(1)
				return r.DeadLetter(ctx, m, &sluice.DeadLetterOptions{Reason: "thirteen"})
			case i%5 == 0 && m.DeliveryCount == 1:
				return fmt.Errorf("first try of %d fails", i)
			case i%7 == 0 && m.DeliveryCount == 1:
				panic("first try panics")
			}
			mu.Lock()
			done[string(m.Body)] = m.DeliveryCount
			mu.Unlock()
			handled.Add(1)
			return nil
		}
		p := startProcessor(t, c, q, h, &sluice.ProcessorOptions{
			MaxConcurrent: 4,
			OnError: func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			},
		})
		waitUntil(t, "every message handled", func() bool { return handled.Load() == n })
		stop(t, p)

		if got := peak.Load(); got > 4 || got < 2 {
			t.Fatalf("peak concurrency %d, want between 2 and the bound 4", got)
		}
		for i := range n {
			want := 1
			if i%5 == 0 || i%7 == 0 {
				want = 2
			}
			if i == 13 {
				continue
			}
			if got := done[strconv.Itoa(i)]; got != want {
				t.Fatalf("message %d succeeded on delivery %d, want %d", i, got, want)
			}
		}
		st, err := c.GetQueueStats(ctx, q)
		if err != nil || st.Active+st.InFlight != 0 || st.DeadLettered != 1 {
			t.Fatalf("stats after processing: %+v, %v; want empty with one dead letter", st, err)
		}
		mu.Lock()
		defer mu.Unlock()
		var panics int
		for _, err := range errs {
			if strings.Contains(err.Error(), "panicked") {
				panics++
			}
		}
		if panics != 4 { // 0 and 35 fail as multiples of 5 first
			t.Fatalf("%d panics reported, want 4 (7, 14, 21, 28): %v", panics, errs)
		}
	})
}

// A handler that runs longer than the lock keeps the message: the
// processor renews the lock, and the message is delivered once.
func TestProcessorRenewsLock(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: 2 * time.Second})
		send(t, newSender(t, c, q), "slow")
		var calls, finished atomic.Int64
		p := startProcessor(t, c, q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			calls.Add(1)
			defer finished.Add(1)
			select {
			case <-time.After(5 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, &sluice.ProcessorOptions{MaxConcurrent: 2})
		waitUntil(t, "the slow handler", func() bool { return finished.Load() == 1 })
		stop(t, p)
		if calls.Load() != 1 {
			t.Fatalf("handler called %d times, want once: the lock was not renewed", calls.Load())
		}
		if st, _ := c.GetQueueStats(t.Context(), q); st.Active+st.InFlight+st.DeadLettered != 0 {
			t.Fatalf("stats: %+v, want the message completed", st)
		}
	})
}

// Without renewal, a handler that outlives its lock loses the message:
// the complete fails with ErrLockLost and the message comes again with a
// higher delivery count.
func TestProcessorLockLost(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		q := createQueue(t, c, &sluice.QueueProperties{LockDuration: time.Second})
		send(t, newSender(t, c, q), "m")
		var (
			deliveries []int
			lockLost   atomic.Int64
			mu         sync.Mutex
		)
		p := startProcessor(t, c, q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			deliveries = append(deliveries, m.DeliveryCount)
			mu.Unlock()
			if m.DeliveryCount == 1 {
				time.Sleep(1500 * time.Millisecond)
			}
			return nil
		}, &sluice.ProcessorOptions{
			MaxConcurrent: 2, MaxAutoLockRenewal: -1,
			OnError: func(err error) {
				if errors.Is(err, sluice.ErrLockLost) {
					lockLost.Add(1)
				}
			},
		})
		waitUntil(t, "a second delivery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(deliveries) == 2
		})
		waitUntil(t, "the lost lock reported", func() bool { return lockLost.Load() == 1 })
		stop(t, p)
		if deliveries[0] != 1 || deliveries[1] != 2 {
			t.Fatalf("delivery counts %v, want [1 2]", deliveries)
		}
	})
}

// Stop waits for running handlers; when its context ends first, it ends
// the handlers' contexts and their messages are abandoned.
func TestProcessorStop(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		// With one delivery allowed: a stop that cuts the handler short
		// must not use it up.
		q := createQueue(t, c, &sluice.QueueProperties{MaxDeliveryCount: 1})
		send(t, newSender(t, c, q), "stuck")
		started := make(chan struct{})
		var ended atomic.Bool
		p := startProcessor(t, c, q, func(ctx context.Context, _ *sluice.Receiver, m *sluice.ReceivedMessage) error {
			close(started)
			<-ctx.Done()
			ended.Store(true)
			return ctx.Err()
		}, nil)
		<-started
		sctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		err := p.Stop(sctx)
		wantErr(t, "Stop with a handler that does not return", err, context.DeadlineExceeded)
		if !ended.Load() {
			t.Fatal("Stop returned before the handler's context ended and it returned")
		}
		r := newReceiver(t, c, q, sluice.PeekLock)
		if ms := receive(t, r, 1); ms[0].DeliveryCount != 1 {
			t.Fatalf("message after a forced stop came with delivery count %d, want 1 (released, not abandoned)", ms[0].DeliveryCount)
		}
		if reasons, err := c.DeadLetterReasons(t.Context(), q); err != nil || len(reasons) != 0 {
			t.Fatalf("dead letters after a forced stop: %v, %v", reasons, err)
		}
	})
}
