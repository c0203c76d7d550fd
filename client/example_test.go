package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/server"
)

// serve starts a server on an embedded SQLite file, as `sluice serve`
// does, and returns its address and a function that stops it.
func serve(ctx context.Context) (string, func()) {
	dir, _ := os.MkdirTemp("", "sluice-example")
	lib, err := sluice.Open(ctx, "sqlite://"+filepath.Join(dir, "sluice.db"), nil)
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Client: lib, Addr: "127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(ctx); err != nil {
		panic(err)
	}
	return "http://" + srv.Addr().String(), func() {
		srv.Shutdown(context.Background())
		lib.Close()
		os.RemoveAll(dir)
	}
}

// Send and receive through a server: the client's calls are the
// library's.
func Example() {
	ctx := context.Background()
	addr, stop := serve(ctx)
	defer stop()

	c, err := client.New(addr, nil)
	if err != nil {
		panic(err)
	}
	if _, err := c.CreateQueue(ctx, "orders", nil); err != nil {
		panic(err)
	}
	s, _ := c.NewSender("orders")
	if _, err := s.Send(ctx, &sluice.Message{Body: []byte("one pizza")}); err != nil {
		panic(err)
	}
	r, _ := c.NewReceiver("orders", nil)
	msgs, err := r.Receive(ctx, 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", msgs[0].Body)
	if err := r.Complete(ctx, msgs[0]); err != nil {
		panic(err)
	}
	// Output: one pizza
}

// Consume a namespace's streams from a server: the server pulls the
// partitions for the consumer and streams its deliveries, each stream's
// events in order; the handler's return settles each.
func ExampleClient_NewStreamProcessor() {
	ctx := context.Background()
	addr, stop := serve(ctx)
	defer stop()
	c, err := client.New(addr, nil)
	if err != nil {
		panic(err)
	}

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
