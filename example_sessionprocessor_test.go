package sluice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluicehq/sluice"
)

// A session processor holds several sessions at once and handles each
// session's messages in the order they were sent, one at a time, keeping
// a running state per session.
func ExampleSessionProcessor() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	c.CreateQueue(ctx, "carts", &sluice.QueueProperties{RequiresSession: true})
	s, _ := c.NewSender("carts")
	s.SendBatch(ctx, []*sluice.Message{
		{SessionID: "alice", Body: []byte("apples")},
		{SessionID: "bob", Body: []byte("bread")},
		{SessionID: "alice", Body: []byte("pears")},
		{SessionID: "bob", Body: []byte("butter")},
	})

	var (
		mu   sync.Mutex
		done = make(chan struct{})
		left = 4
	)
	p, _ := c.NewSessionProcessor("carts", func(ctx context.Context, s sluice.MessageSessionReceiver, m *sluice.ReceivedMessage) error {
		cart, _ := s.SessionState(ctx) // this session's items so far
		cart = append(cart, " "+string(m.Body)...)
		if err := s.SetSessionState(ctx, cart); err != nil {
			return err // abandoned: it comes again, still first of its session
		}
		mu.Lock()
		defer mu.Unlock()
		if left--; left == 0 {
			close(done)
		}
		return nil
	}, &sluice.SessionProcessorOptions{MaxConcurrentSessions: 2, PrefetchCount: 8})
	p.Start(ctx)
	<-done
	p.Stop(ctx)

	for _, id := range []string{"alice", "bob"} {
		r, _ := c.AcceptSession(ctx, "carts", id, nil)
		cart, _ := r.SessionState(ctx)
		fmt.Printf("%s:%s\n", id, cart)
		r.Close(ctx)
	}
	// Output:
	// alice: apples pears
	// bob: bread butter
}
