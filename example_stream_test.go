package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Publish events to a stream and handle them with a stream processor: a
// consumer registered for a namespace receives every stream of it, each
// stream's events in order.
func ExampleStreamProcessor() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	got := make(chan string)
	p := c.NewStreamProcessor(nil)
	err = p.Handle("shipping", func(ctx context.Context, ev *sluice.StreamEvent) error {
		got <- fmt.Sprintf("%s/%s #%d: %s", ev.Namespace, ev.Key, ev.Position, ev.Body)
		return nil
	}, &sluice.ConsumerOptions{Namespace: "orders"})
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Stop(ctx)

	order := sluice.StreamID{Namespace: "orders", Key: "order-42"}
	if _, err := c.Publish(ctx, order, sluice.Event{Body: []byte("placed")}, sluice.Event{Body: []byte("paid")}); err != nil {
		panic(err)
	}
	for range 2 {
		select {
		case s := <-got:
			fmt.Println(s)
		case <-time.After(10 * time.Second):
			fmt.Println("timed out")
		}
	}
	// Output:
	// orders/order-42 #1: placed
	// orders/order-42 #2: paid
}

// Subscribe a consumer to one stream from a position: it receives that
// stream's events from there on, and its subscription is stored until
// Unsubscribe.
func ExampleClient_Subscribe() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// Keep consumed events for a day, so that a subscription can start
	// from an older position.
	if err := c.SetStreamRetention(ctx, "sensors", sluice.StreamRetention{MaxAge: 24 * time.Hour}); err != nil {
		panic(err)
	}
	sensor := sluice.StreamID{Namespace: "sensors", Key: "t-1"}
	pos, _ := c.Publish(ctx, sensor, sluice.Event{Body: []byte("19.5")}, sluice.Event{Body: []byte("19.7")}, sluice.Event{Body: []byte("20.1")})

	got := make(chan string)
	p := c.NewStreamProcessor(nil)
	p.Handle("dashboard", func(ctx context.Context, ev *sluice.StreamEvent) error {
		got <- string(ev.Body)
		return nil
	}, nil)
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Stop(ctx)
	sub, err := c.Subscribe(ctx, sensor, "dashboard", sluice.FromPosition(pos[1]))
	if err != nil {
		panic(err)
	}
	fmt.Println(<-got, <-got)
	if err := c.Unsubscribe(ctx, sub.ID); err != nil {
		panic(err)
	}
	// Output:
	// 19.7 20.1
}

// Processors of one tenant on PostgreSQL or MariaDB share its partitions;
// ClusterStatus shows who pulls what and how far behind each partition is.
// (On SQLite, as here, one processor runs at a time.)
func ExampleClient_ClusterStatus() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), &sluice.Options{StreamPartitions: 4})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{Name: "worker", HeartbeatInterval: 50 * time.Millisecond})
	if err := p.Handle("audit", func(context.Context, *sluice.StreamEvent) error { return nil },
		&sluice.ConsumerOptions{Namespace: "orders"}); err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Stop(ctx)
	for range 100 { // until the node holds every partition
		if st, err := c.ClusterStatus(ctx); err == nil && len(st.Nodes) == 1 && len(st.Nodes[0].Partitions) == 4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		panic(err)
	}
	for _, n := range st.Nodes {
		fmt.Println(strings.HasPrefix(n.ID, "worker-"), n.Alive, n.Partitions)
	}
	for _, ps := range st.Partitions {
		fmt.Println(ps.Partition, ps.Held, ps.Epoch, ps.Lag, len(ps.Subscriptions))
	}
	// Output:
	// true true [0 1 2 3]
	// 0 true 1 0 1
	// 1 true 1 0 1
	// 2 true 1 0 1
	// 3 true 1 0 1
}

// Follow a namespace's streams without subscribing: a tail stores
// nothing and holds back no retention.
func ExampleClient_TailStream() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	started := make(chan struct{})
	done := make(chan error)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		seen := 0
		done <- c.TailStream(tctx, "orders", "", func(ev *sluice.StreamEvent) error {
			fmt.Printf("%s: %s\n", ev.Key, ev.Body)
			if seen++; seen == 2 {
				cancel()
			}
			return nil
		}, &sluice.TailOptions{Started: func(int) { close(started) }})
	}()
	<-started
	c.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "order-1"}, sluice.Event{Body: []byte("placed")})
	c.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "order-1"}, sluice.Event{Body: []byte("paid")})
	fmt.Println(<-done)
	// Output:
	// order-1: placed
	// order-1: paid
	// context canceled
}

// Bound each attempt of a stream handler: an attempt that outlives its
// time fails with ErrHandlerTimeout (a middleware outside TimeoutStream
// sees it), and the event is delivered again.
func ExampleTimeoutStream() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	attempts := make(chan string, 8)
	report := func(next sluice.StreamHandler) sluice.StreamHandler {
		return func(ctx context.Context, ev *sluice.StreamEvent) error {
			err := next(ctx, ev)
			attempts <- fmt.Sprintf("attempt %d: timed out: %v", ev.Attempt, errors.Is(err, sluice.ErrHandlerTimeout))
			return err
		}
	}
	p := c.NewStreamProcessor(&sluice.StreamProcessorOptions{
		Middleware: []sluice.StreamMiddleware{report, sluice.TimeoutStream(100 * time.Millisecond)},
	})
	err = p.Handle("shipping", func(ctx context.Context, ev *sluice.StreamEvent) error {
		if ev.Attempt == 1 { // a slow first attempt, which watches its context
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, &sluice.ConsumerOptions{Namespace: "orders", RetryBackoff: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Stop(ctx)

	if _, err := c.Publish(ctx, sluice.StreamID{Namespace: "orders", Key: "order-42"}, sluice.Event{Body: []byte("placed")}); err != nil {
		panic(err)
	}
	for range 2 {
		select {
		case s := <-attempts:
			fmt.Println(s)
		case <-time.After(10 * time.Second):
			fmt.Println("timed out")
		}
	}
	// Output:
	// attempt 1: timed out: true
	// attempt 2: timed out: false
}
