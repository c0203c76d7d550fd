package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetype"
	"github.com/sluicehq/sluice/store"
)

// Open an embedded SQLite backend, send a message, lease it and complete
// it by its receipt.
func ExampleOpenBackend() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := sluice.OpenBackend(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	s, err := b.Store(store.Tenant{Service: "shop", Provider: "default"})
	if err != nil {
		panic(err)
	}
	if err := s.CreateQueue(ctx, &store.QueueSettings{Name: "orders"}); err != nil {
		panic(err)
	}
	seqs, _ := s.Enqueue(ctx, &store.EnqueueParams{Queue: "orders", Messages: []store.NewMessage{{Payload: []byte("one pizza")}}})
	fmt.Println("sent", seqs)

	leased, _ := s.Lease(ctx, &store.LeaseParams{Queue: "orders", Max: 10, Visibility: time.Minute})
	m := leased[0]
	fmt.Printf("leased #%d %q, delivery %d\n", m.Seq, m.Payload, m.DeliveryCount)

	res, _ := s.Settle(ctx, &store.SettleParams{Queue: "orders", Action: store.Complete, Receipts: []sluicetype.Receipt{m.Receipt}})
	fmt.Println("completed:", res[0].Err == nil)
	// Output:
	// sent [1]
	// leased #1 "one pizza", delivery 1
	// completed: true
}

// A partition log: append records and read them after a position.
func ExampleOpenBackend_partitionLog() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := sluice.OpenBackend(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	s, _ := b.Store(store.Tenant{Service: "shop", Provider: "default"})

	res, _ := s.Append(ctx, &store.AppendParams{Partition: 3, Records: []store.NewRecord{
		{Namespace: "cart", Key: "alice", Payload: []byte("added apples")},
		{Namespace: "cart", Key: "alice", Payload: []byte("checked out")},
	}})
	fmt.Println("positions", res.First, "to", res.Last)
	recs, _ := s.Read(ctx, &store.ReadParams{Partition: 3, After: 1, Max: 10})
	fmt.Printf("after 1: %d %q\n", recs[0].Position, recs[0].Payload)
	// Output:
	// positions 1 to 2
	// after 1: 2 "checked out"
}

// The queue API: create a queue, send, receive in peek-lock mode and
// settle.
func ExampleClient() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.CreateQueue(ctx, "orders", &sluice.QueueProperties{MaxDeliveryCount: 3}); err != nil {
		panic(err)
	}

	s, _ := c.NewSender("orders")
	seq, _ := s.Send(ctx, &sluice.Message{Body: []byte("one pizza"), Subject: "order",
		ApplicationProperties: map[string]string{"size": "large"}})
	fmt.Println("sent #", seq)

	r, _ := c.NewReceiver("orders", nil)
	msgs, _ := r.Receive(ctx, 10)
	m := msgs[0]
	fmt.Printf("received #%d %q (%s, size %s), delivery %d\n",
		m.SequenceNumber, m.Body, m.Subject, m.ApplicationProperties["size"], m.DeliveryCount)
	fmt.Println("complete:", r.Complete(ctx, m))
	fmt.Println("complete again:", errors.Is(r.Complete(ctx, m), sluice.ErrLockLost))
	// Output:
	// sent # 1
	// received #1 "one pizza" (order, size large), delivery 1
	// complete: <nil>
	// complete again: true
}

// A processor runs a handler over a queue's messages with bounded
// concurrency: nil completes a message, an error abandons it.
func ExampleProcessor() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	c, err := sluice.Open(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.CreateQueue(ctx, "jobs", nil)
	s, _ := c.NewSender("jobs")
	s.Send(ctx, &sluice.Message{Body: []byte("resize photo")})

	done := make(chan string)
	p, _ := c.NewProcessor("jobs", func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
		if m.DeliveryCount == 1 {
			return errors.New("flaky") // abandoned: delivered again
		}
		done <- fmt.Sprintf("%s on delivery %d", m.Body, m.DeliveryCount)
		return nil
	}, &sluice.ProcessorOptions{MaxConcurrent: 4, OnError: func(error) {}})
	p.Start(ctx)
	fmt.Println(<-done)
	p.Stop(ctx)
	// Output:
	// resize photo on delivery 2
}

// A retry policy keeps a failed message away for a while before it comes
// again; a handler that knows when to try again says so with RetryAfter.
func ExampleProcessorOptions_retry() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	c, err := sluice.Open(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.CreateQueue(ctx, "emails", nil)
	s, _ := c.NewSender("emails")
	s.Send(ctx, &sluice.Message{Body: []byte("welcome mail")})

	done := make(chan string)
	start := time.Now()
	p, _ := c.NewProcessor("emails", func(ctx context.Context, r *sluice.Receiver, m *sluice.ReceivedMessage) error {
		switch m.DeliveryCount {
		case 1:
			return errors.New("mail server down") // back after 50-100ms (jittered)
		case 2:
			return sluice.RetryAfter(errors.New("rate limited"), 200*time.Millisecond)
		}
		done <- fmt.Sprintf("%s on delivery %d, after at least 250ms: %v",
			m.Body, m.DeliveryCount, time.Since(start) >= 250*time.Millisecond)
		return nil
	}, &sluice.ProcessorOptions{
		Retry:   sluice.ExponentialBackoff{Initial: 100 * time.Millisecond, Max: time.Minute, Jitter: true},
		OnError: func(error) {},
	})
	p.Start(ctx)
	fmt.Println(<-done)
	p.Stop(ctx)
	// Output:
	// welcome mail on delivery 3, after at least 250ms: true
}

// A topic copies each message to the subscriptions whose rules match.
func ExampleClient_CreateTopic() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	c.CreateTopic(ctx, "orders", nil)
	c.CreateSubscription(ctx, "orders", "all", nil) // the $Default rule takes everything
	c.CreateSubscription(ctx, "orders", "large", nil,
		sluice.Rule{Name: "large", Filter: sluice.SQLFilter{Expression: "quantity > 10 AND region IN ('eu', 'uk')"}})

	s, _ := c.NewSender("orders")
	s.SendBatch(ctx, []*sluice.Message{
		{Body: []byte("2 pizzas"), ApplicationProperties: map[string]string{"quantity": "2", "region": "eu"}},
		{Body: []byte("40 pizzas"), ApplicationProperties: map[string]string{"quantity": "40", "region": "uk"}},
	})
	for _, sub := range []string{"all", "large"} {
		r, _ := c.NewReceiver(sluice.SubscriptionPath("orders", sub), &sluice.ReceiverOptions{Mode: sluice.ReceiveAndDelete})
		msgs, _ := r.Receive(ctx, 10)
		for _, m := range msgs {
			fmt.Printf("%s: %s\n", sub, m.Body)
		}
	}
	// Output:
	// all: 2 pizzas
	// all: 40 pizzas
	// large: 40 pizzas
}

// Sessions keep related messages in order with one receiver at a time.
func ExampleClient_AcceptNextSession() {
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
		{SessionID: "alice", Body: []byte("add apples")},
		{SessionID: "alice", Body: []byte("add pears")},
		{SessionID: "alice", Body: []byte("check out")},
	})

	r, _ := c.AcceptNextSession(ctx, "carts", nil)
	defer r.Close(ctx)
	msgs, _ := r.Receive(ctx, 10)
	for _, m := range msgs {
		fmt.Println(r.SessionID(), string(m.Body))
		r.Complete(ctx, m)
	}
	r.SetSessionState(ctx, []byte("checked out"))
	state, _ := r.SessionState(ctx)
	fmt.Println("state:", string(state))
	// Output:
	// alice add apples
	// alice add pears
	// alice check out
	// state: checked out
}
