package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func startSessionProcessor(t *testing.T, c *sluice.Client, q string, h sluice.SessionHandler, opts *sluice.SessionProcessorOptions) *sluice.SessionProcessor {
	t.Helper()
	p, err := c.NewSessionProcessor(q, h, opts)
	if err != nil {
		t.Fatalf("NewSessionProcessor: %v", err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	wantErr(t, "a second Start", p.Start(t.Context()), sluice.ErrInvalidArgument)
	return p
}

func stopSessions(t *testing.T, p *sluice.SessionProcessor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// sessionLog records, per session, what a session processor's handlers
// did, and checks the session's order as they do it.
type sessionLog struct {
	mu      sync.Mutex
	next    map[string]int  // the next message index each session must see
	running map[string]int  // handlers running per session
	held    map[string]bool // sessions with a handler running
	maxHeld int             // most sessions with handlers running at once
	failed  map[string]bool // messages whose first delivery failed
	errs    []string
}

func newSessionLog() *sessionLog {
	return &sessionLog{next: map[string]int{}, running: map[string]int{}, held: map[string]bool{}, failed: map[string]bool{}}
}

func (l *sessionLog) errorf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// A session processor holds at most MaxConcurrentSessions sessions, runs
// one handler a session at a time, in the order the session's messages
// were sent, and keeps that order through failures (the failed message
// comes again before any later one of its session, prefetched or not); it
// gives handlers the session's state, and completes in batches. The same
// holds on a partitioned queue, whose sessions spread over partitions.
func TestSessionProcessor(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		for _, tc := range []struct{ prefetch, partitions int }{{0, 1}, {8, 1}, {8, 4}} {
			prefetch := tc.prefetch
			t.Run(fmt.Sprintf("prefetch %d partitions %d", prefetch, tc.partitions), func(t *testing.T) {
				ctx := t.Context()
				q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, PartitionCount: tc.partitions})
				const sessions, each = 6, 12
				var msgs []*sluice.Message
				for i := range each {
					for s := range sessions {
						msgs = append(msgs, sessionMsg("s"+strconv.Itoa(s), strconv.Itoa(i)))
					}
				}
				if _, err := newSender(t, c, q).SendBatch(ctx, msgs); err != nil {
					t.Fatal(err)
				}
				log := newSessionLog()
				var completed atomic.Int32
				h := func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
					id := s.SessionID()
					i, _ := strconv.Atoi(string(m.Body))
					log.mu.Lock()
					if m.SessionID != id {
						log.errorf("session %s was given a message of session %s", id, m.SessionID)
					}
					if i != log.next[id] {
						log.errorf("session %s: message %d handled when %d was next", id, i, log.next[id])
					}
					log.running[id]++
					if log.running[id] > 1 {
						log.errorf("session %s: %d handlers at once", id, log.running[id])
					}
					log.held[id] = true
					log.maxHeld = max(log.maxHeld, len(log.held))
					key := id + "/" + string(m.Body)
					fail := i%5 == 3 && !log.failed[key]
					log.failed[key] = true
					log.mu.Unlock()
					defer func() {
						log.mu.Lock()
						if log.running[id]--; log.running[id] == 0 {
							delete(log.held, id)
						}
						if !fail {
							log.next[id] = i + 1
						}
						log.mu.Unlock()
					}()
					if fail {
						return errors.New("fails once")
					}
					if state, err := s.SessionState(ctx); err != nil || (i > 0 && string(state) != strconv.Itoa(i-1)) {
						log.mu.Lock()
						log.errorf("session %s at %d: state %q, %v", id, i, state, err)
						log.mu.Unlock()
					}
					if err := s.SetSessionState(ctx, []byte(strconv.Itoa(i))); err != nil {
						return err
					}
					completed.Add(1)
					return nil
				}
				p := startSessionProcessor(t, c, q, h, &sluice.SessionProcessorOptions{
					MaxConcurrentSessions: 3, PrefetchCount: prefetch, SessionIdleTimeout: 500 * time.Millisecond,
					OnError: func(error) {},
				})
				waitUntil(t, "every message handled", func() bool { return completed.Load() == sessions*each })
				waitUntil(t, "every completion committed", func() bool {
					st, err := c.GetQueueStats(ctx, q)
					return err == nil && st.Active == 0 && st.InFlight == 0 && st.Scheduled == 0
				})
				stopSessions(t, p)
				log.mu.Lock()
				defer log.mu.Unlock()
				for _, e := range log.errs {
					t.Error(e)
				}
				if log.maxHeld > 3 {
					t.Errorf("%d sessions handled at once; MaxConcurrentSessions is 3", log.maxHeld)
				}
				for s := range sessions {
					if id := "s" + strconv.Itoa(s); log.next[id] != each {
						t.Errorf("session %s ended at %d, want %d", id, log.next[id], each)
					}
				}
			})
		}
	})
}

// A session the processor holds and waits on for SessionIdleTimeout is
// released, so that a processor of one session at a time moves on to the
// next; Stop releases a session's prefetched messages without counting a
// delivery; a handler's Close releases its session.
func TestSessionProcessorReleases(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		t.Run("idle", func(t *testing.T) {
			q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
			s := newSender(t, c, q)
			if _, err := s.Send(ctx, sessionMsg("a", "a1")); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string
			p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
				mu.Lock()
				seen = append(seen, string(m.Body))
				mu.Unlock()
				return nil
			}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, SessionIdleTimeout: 300 * time.Millisecond})
			defer stopSessions(t, p)
			waitUntil(t, "a1 handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })
			if _, err := s.Send(ctx, sessionMsg("b", "b1")); err != nil {
				t.Fatal(err)
			}
			// Only once a is released (idle) can the one slot take b.
			waitUntil(t, "b1 handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
		})
		t.Run("stop", func(t *testing.T) {
			q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
			var msgs []*sluice.Message
			for i := range 6 {
				msgs = append(msgs, sessionMsg("a", strconv.Itoa(i)))
			}
			if _, err := newSender(t, c, q).SendBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			started, unblock := make(chan struct{}, 6), make(chan struct{})
			var handled atomic.Int32
			var errs errorLog
			p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
				started <- struct{}{}
				<-unblock
				handled.Add(1)
				return nil
			}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, PrefetchCount: 5, SessionIdleTimeout: sluice.Forever, OnError: errs.add})
			<-started
			waitUntil(t, "the session's messages prefetched", func() bool {
				st, err := c.GetQueueStats(ctx, q)
				return err == nil && st.InFlight == 6
			})
			stopped := make(chan error, 1)
			go func() { stopped <- p.Stop(context.Background()) }()
			// Stop waits for the running handler. Unblocked a moment after
			// Stop began, it usually returns once receiving stopped, so that
			// the other five come back (when not, fewer are checked).
			time.Sleep(300 * time.Millisecond)
			close(unblock)
			if err := <-stopped; err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if e := errs.all(); len(e) > 0 {
				t.Errorf("OnError: %v", e)
			}
			// The messages no handler took came back, in order, their
			// deliveries not counted.
			n := int(handled.Load())
			r, err := c.AcceptSession(ctx, q, "a", nil)
			if err != nil {
				t.Fatalf("accept after Stop: %v", err)
			}
			defer r.Close(ctx)
			got, err := r.TryReceive(ctx, 10)
			if err != nil || len(got) != 6-n {
				t.Fatalf("after Stop, with %d handled: %v, %v; want the other %d", n, bodies(got), err, 6-n)
			}
			for i, m := range got {
				if string(m.Body) != strconv.Itoa(n+i) || m.DeliveryCount != 1 {
					t.Errorf("message %q came back with delivery count %d; want %d, count 1", m.Body, m.DeliveryCount, n+i)
				}
			}
		})
		t.Run("handler closes", func(t *testing.T) {
			q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
			if _, err := newSender(t, c, q).SendBatch(ctx, []*sluice.Message{sessionMsg("a", "0"), sessionMsg("a", "1"), sessionMsg("a", "2")}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			tokens := map[string]string{}
			p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
				mu.Lock()
				tokens[string(m.Body)] = s.LockToken()
				mu.Unlock()
				if string(m.Body) == "0" {
					return s.Close(ctx) // release after this message
				}
				return nil
			}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, PrefetchCount: 2, SessionIdleTimeout: sluice.Forever})
			defer stopSessions(t, p)
			waitUntil(t, "all three handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(tokens) == 3 })
			mu.Lock()
			defer mu.Unlock()
			if tokens["0"] == tokens["1"] || tokens["1"] != tokens["2"] {
				t.Errorf("session lock tokens %v: want message 0 under one lock, 1 and 2 under the next", tokens)
			}
			waitUntil(t, "every completion committed", func() bool {
				st, err := c.GetQueueStats(ctx, q)
				return err == nil && st.Active == 0 && st.InFlight == 0 && st.Scheduled == 0
			})
		})
	})
}

// The processor renews the session lock while a handler runs past it and
// while it waits for the session's next message.
func TestSessionProcessorRenews(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const lock = 3 * time.Second
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: lock})
		s := newSender(t, c, q)
		if _, err := s.Send(ctx, sessionMsg("a", "slow")); err != nil {
			t.Fatal(err)
		}
		var errs errorLog
		var done atomic.Int32
		tokens := make(chan string, 2)
		p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
			tokens <- s.LockToken()
			if string(m.Body) == "slow" {
				select {
				case <-time.After(3 * lock):
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			done.Add(1)
			return nil
		}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, SessionIdleTimeout: sluice.Forever, OnError: errs.add})
		defer stopSessions(t, p)
		waitUntil(t, "the slow handler", func() bool { return done.Load() == 1 })
		// Held, idle, for more than the lock's duration: still the same
		// session lock when the next message comes.
		time.Sleep(2 * lock)
		if _, err := s.Send(ctx, sessionMsg("a", "next")); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the next message", func() bool { return done.Load() == 2 })
		if a, b := <-tokens, <-tokens; a != b {
			t.Errorf("lock tokens %s then %s: the session was lost or released while held", a, b)
		}
		if e := errs.all(); len(e) > 0 {
			t.Errorf("OnError: %v", e)
		}
	})
}

// Bad options are refused with ErrInvalidArgument.
func TestSessionProcessorOptions(t *testing.T) {
	c := reopen(t, "sqlite", "sp"+randHex(8))
	h := func(context.Context, sluice.MessageSessionReceiver, *sluice.ReceivedMessage) error { return nil }
	for _, tc := range []struct {
		name string
		a    sluice.SessionAcceptor
		h    sluice.SessionHandler
		q    string
		o    sluice.SessionProcessorOptions
	}{
		{"nil acceptor", nil, h, "q", sluice.SessionProcessorOptions{}},
		{"nil handler", c, nil, "q", sluice.SessionProcessorOptions{}},
		{"empty entity", c, h, "", sluice.SessionProcessorOptions{}},
		{"negative sessions", c, h, "q", sluice.SessionProcessorOptions{MaxConcurrentSessions: -1}},
		{"negative calls", c, h, "q", sluice.SessionProcessorOptions{MaxConcurrentCallsPerSession: -1}},
		{"negative prefetch", c, h, "q", sluice.SessionProcessorOptions{PrefetchCount: -1}},
		{"prefetch beyond the batch limit", c, h, "q", sluice.SessionProcessorOptions{PrefetchCount: 1000}},
		{"negative idle", c, h, "q", sluice.SessionProcessorOptions{SessionIdleTimeout: -time.Second}},
		{"nil middleware", c, h, "q", sluice.SessionProcessorOptions{MessageMiddleware: []sluice.MessageMiddleware{nil}}},
	} {
		_, err := sluice.NewSessionProcessor(tc.a, tc.q, tc.h, &tc.o)
		wantErr(t, tc.name, err, sluice.ErrInvalidArgument)
	}
}

// A handler that runs past the session lock, with MaxAutoLockRenewal
// negative (never renewed while it runs), loses the session: OnError
// hears ErrSessionLockLost (or the message's lost lock), and the message
// comes again, its delivery counted, to the processor's next accept.
func TestSessionProcessorLockLost(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const lock = time.Second
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: lock})
		if _, err := newSender(t, c, q).Send(ctx, sessionMsg("a", "m")); err != nil {
			t.Fatal(err)
		}
		var errs errorLog
		counts := make(chan int, 2)
		p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
			counts <- m.DeliveryCount
			if m.DeliveryCount == 1 {
				deadline := time.Now().Add(3 * lock)
				for time.Now().Before(deadline) { // past the lock, whatever ctx says
					time.Sleep(50 * time.Millisecond)
				}
			}
			return nil
		}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, MaxAutoLockRenewal: -1, SessionIdleTimeout: sluice.Forever, OnError: errs.add})
		defer stopSessions(t, p)
		if first, again := <-counts, <-counts; first != 1 || again != 2 {
			t.Fatalf("delivery counts %d then %d; want 1 then 2", first, again)
		}
		lost := false
		for _, err := range errs.all() {
			lost = lost || errors.Is(err, sluice.ErrSessionLockLost) || errors.Is(err, sluice.ErrLockLost)
		}
		if !lost {
			t.Errorf("OnError heard %v; want the lost lock", errs.all())
		}
	})
}

// Order holds when the processor lets go of prefetched messages while
// the session goes on (their renewal budget, counted from receipt, spent
// behind a slow handler), and when a handler abandons its own message
// with later ones prefetched: the session is released, and they come
// back first.
func TestSessionProcessorOrderWithPrefetch(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		run := func(t *testing.T, n int, h func(m *sluice.ReceivedMessage, s sluice.MessageSessionReceiver) error, opts sluice.SessionProcessorOptions, want []string) {
			ctx := t.Context()
			q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: 5 * time.Second})
			var msgs []*sluice.Message
			for i := range n {
				msgs = append(msgs, sessionMsg("a", strconv.Itoa(i)))
			}
			if _, err := newSender(t, c, q).SendBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string
			opts.MaxConcurrentSessions, opts.OnError = 1, func(error) {}
			p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
				mu.Lock()
				seen = append(seen, string(m.Body))
				mu.Unlock()
				return h(m, s)
			}, &opts)
			defer stopSessions(t, p)
			waitUntil(t, "every delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) >= len(want) })
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Errorf("handled %v, want %v", seen, want)
			}
		}
		t.Run("let go", func(t *testing.T) {
			// 1 and 2 wait behind 0 past their renewal budget.
			run(t, 6, func(m *sluice.ReceivedMessage, _ sluice.MessageSessionReceiver) error {
				if string(m.Body) == "0" {
					time.Sleep(2 * time.Second)
				}
				return nil
			}, sluice.SessionProcessorOptions{PrefetchCount: 2, MaxAutoLockRenewal: 300 * time.Millisecond, SessionIdleTimeout: time.Minute},
				[]string{"0", "1", "2", "3", "4", "5"})
		})
		t.Run("handler abandons", func(t *testing.T) {
			run(t, 4, func(m *sluice.ReceivedMessage, s sluice.MessageSessionReceiver) error {
				if string(m.Body) == "1" && m.DeliveryCount == 1 {
					return s.Abandon(context.Background(), m, nil)
				}
				return nil
			}, sluice.SessionProcessorOptions{PrefetchCount: 3, SessionIdleTimeout: time.Minute},
				[]string{"0", "1", "1", "2", "3"})
		})
	})
}

// A handler that settles its own message and works on, within
// MaxAutoLockRenewal, keeps the session: the processor renews its lock
// though no message of it is held.
func TestSessionProcessorSettledEarly(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		const lock = 3 * time.Second
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true, LockDuration: lock})
		if _, err := newSender(t, c, q).Send(ctx, sessionMsg("a", "0")); err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
			if err := s.Complete(ctx, m); err != nil {
				return err
			}
			time.Sleep(3 * lock)
			err := s.SetSessionState(ctx, []byte("x"))
			res <- err
			return err
		}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 1, SessionIdleTimeout: sluice.Forever, OnError: func(error) {}})
		defer stopSessions(t, p)
		if err := <-res; err != nil {
			t.Fatalf("SetSessionState after settling early, within MaxAutoLockRenewal: %v", err)
		}
	})
}

// With several calls a session, a session's handlers run concurrently up
// to MaxConcurrentCallsPerSession, and every message is handled.
func TestSessionProcessorCallsPerSession(t *testing.T) {
	noProcessorLeft(t)
	forEachBackend(t, func(t *testing.T, c *sluice.Client) {
		ctx := t.Context()
		q := createQueue(t, c, &sluice.QueueProperties{RequiresSession: true})
		var msgs []*sluice.Message
		for i := range 40 {
			msgs = append(msgs, sessionMsg("s"+strconv.Itoa(i%2), strconv.Itoa(i)))
		}
		if _, err := newSender(t, c, q).SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var (
			mu       sync.Mutex
			running  = map[string]int{}
			peak     = map[string]int{}
			handled  = map[string]bool{}
			overlaps atomic.Int32
		)
		p := startSessionProcessor(t, c, q, func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
			mu.Lock()
			running[s.SessionID()]++
			peak[s.SessionID()] = max(peak[s.SessionID()], running[s.SessionID()])
			if running[s.SessionID()] > 1 {
				overlaps.Add(1)
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // long enough for the session's next to start beside it
			mu.Lock()
			running[s.SessionID()]--
			handled[string(m.Body)] = true
			mu.Unlock()
			return nil
		}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 2, MaxConcurrentCallsPerSession: 3, SessionIdleTimeout: time.Second, OnError: func(error) {}})
		defer stopSessions(t, p)
		waitUntil(t, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) == 40 })
		mu.Lock()
		defer mu.Unlock()
		for id, n := range peak {
			if n > 3 {
				t.Errorf("session %s: %d handlers at once; MaxConcurrentCallsPerSession is 3", id, n)
			}
		}
		if overlaps.Load() == 0 {
			t.Errorf("no session ran two handlers at once with 3 calls a session")
		}
	})
}
