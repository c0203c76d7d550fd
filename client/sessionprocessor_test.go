package client_test

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
	"github.com/sluicehq/sluice/client"
)

// Through a server, the session processor handles each session's
// messages in order, one at a time, across sessions at once, keeps that
// order through a failure with messages prefetched, and gives handlers
// the session's state.
func TestRemoteSessionProcessor(t *testing.T) {
	forEachRemote(t, func(t *testing.T, c *client.Client) {
		ctx := t.Context()
		queueWith(t, c, "orders", &sluice.QueueProperties{RequiresSession: true})
		const sessions, each = 4, 8
		var msgs []*sluice.Message
		for i := range each {
			for s := range sessions {
				msgs = append(msgs, &sluice.Message{SessionID: "s" + strconv.Itoa(s), Body: []byte(strconv.Itoa(i))})
			}
		}
		snd, err := c.NewSender("orders")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snd.SendBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var (
			mu       sync.Mutex
			next     = map[string]int{}
			failed   = map[string]bool{}
			problems []string
			done     atomic.Int32
		)
		p, err := c.NewSessionProcessor("orders", func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
			id := s.SessionID()
			i, _ := strconv.Atoi(string(m.Body))
			mu.Lock()
			if i != next[id] {
				problems = append(problems, fmt.Sprintf("session %s: %d handled when %d was next", id, i, next[id]))
			}
			fail := i == 2 && !failed[id]
			failed[id] = failed[id] || i == 2
			mu.Unlock()
			if fail {
				return errors.New("fails once")
			}
			if err := s.SetSessionState(ctx, m.Body); err != nil {
				return err
			}
			mu.Lock()
			next[id] = i + 1
			mu.Unlock()
			done.Add(1)
			return nil
		}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 2, PrefetchCount: 4, SessionIdleTimeout: 500 * time.Millisecond, OnError: func(error) {}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every message handled", func() bool { return done.Load() == sessions*each })
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := p.Stop(stopCtx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Error(p)
		}
		waitFor(t, "every completion committed", func() bool {
			st := statsOf(t, c, "orders")
			return st.Active == 0 && st.InFlight == 0 && st.Scheduled == 0
		})
		s, err := c.AcceptSession(ctx, "orders", "s0", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if state, err := s.SessionState(ctx); err != nil || string(state) != strconv.Itoa(each-1) {
			t.Errorf("session s0's state = %q, %v; want %d", state, err, each-1)
		}
	})
}
